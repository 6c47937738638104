# elrun build.  One Makefile, no generated configuration.
#
#   make              build/elrun, build/libelrun.a, build/libelrun.so, build/elrun.pc
#   make test         install missing packages, build, run every test
#   make demo         install missing packages, build, run the main job
#   make demo-elastic the same training growing 1 -> 2 -> 1 nodes
#   make deps         install missing Debian packages (idempotent, quiet)
#   make SAN=address,undefined unit   sanitizer build of the unit tests (build-san/)
#   make SAN=thread unit              ThreadSanitizer build (build-tsan/)
#   make fuzz         libFuzzer targets (clang)
#   make install PREFIX=/usr/local
#
# Modules are folders under src/; every .c file in them is compiled, so adding
# a file needs no edit here.  src/cli is the binary, the rest is libelrun.

PREFIX  ?= /usr/local
CC      ?= cc
BUILD   ?= build
PKGS    := libuv jansson nettle
VERSION := 0.1.0

# libcurl is not linked: the etcd client dlopen()s it on first use
# (src/common/curl_dl.c), so a job on the built-in store never loads it and its
# ~30 dependencies.  Only its headers are needed to build.
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) libcurl 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Wshadow -Wvla -Wmissing-prototypes -Wstrict-prototypes \
           -Wpointer-arith -Wformat=2 -Wno-unused-parameter -Werror
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -fPIC $(WARN) -Iinclude -Isrc $(PKG_CFLAGS)
# http-parser (src/http) is linked statically: no extra shared library is
# mapped into agents that do not serve /metrics.
LDLIBS  += $(PKG_LIBS) -l:libhttp_parser.a -lpthread -lm -ldl

# Per-program extra libraries: the training example needs BLAS and zlib.
EXAMPLE_CFLAGS_train_fmnist := $(shell pkg-config --cflags openblas zlib 2>/dev/null)
EXAMPLE_LIBS_train_fmnist   := $(shell pkg-config --libs openblas zlib 2>/dev/null)

# Each sanitizer set builds into its own directory, so that an address and a
# thread build do not overwrite each other's objects: build-san for
# address,undefined (CI, t0700 with BUILD=build-san), build-tsan for thread,
# build-san-<set> for anything else.
comma := ,
ifdef SAN
ifeq ($(SAN),address,undefined)
BUILD   := build-san
else ifeq ($(SAN),thread)
BUILD   := build-tsan
else
BUILD   := build-san-$(subst $(comma),-,$(SAN))
endif
CFLAGS  += -O1 -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SAN)
endif

LIB_MODULES := common store rendezvous agent worker coll ckpt etcd job metrics http k8s events dashboard
LIB_SRC  := $(foreach m,$(LIB_MODULES),$(wildcard src/$(m)/*.c))
# The dashboard's page (src/dashboard/assets) compiled in as C arrays.
DASH_ASSETS := $(sort $(wildcard src/dashboard/assets/*))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/dash_assets.o
CLI_SRC  := $(wildcard src/cli/*.c)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC := $(wildcard tests/unit/*.c)
UNIT_OBJ := $(UNIT_SRC:%.c=$(BUILD)/%.o)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
EXAMPLE_SRC := $(wildcard examples/*.c)
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
HELPER_SRC := $(wildcard tests/helpers/*.c)
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAY := $(FUZZ_NAMES:%=$(BUILD)/fuzz_replay_%)
HELPER_BIN := $(HELPER_SRC:tests/helpers/%.c=$(BUILD)/tests/helpers/%)

.PHONY: all deps test unit e2e demo demo-elastic fuzz bench install clean
all: $(BUILD)/elrun $(BUILD)/libelrun.a $(BUILD)/libelrun.so $(BUILD)/elrun.pc \
     $(BUILD)/unit_tests $(FUZZ_REPLAY) $(BENCH_BIN) $(EXAMPLE_BIN) $(HELPER_BIN)

deps:
	@scripts/deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/gen/dash_assets.c: $(DASH_ASSETS) scripts/embed-assets.sh
	@mkdir -p $(dir $@)
	scripts/embed-assets.sh $@ $(DASH_ASSETS)

$(BUILD)/gen/dash_assets.o: $(BUILD)/gen/dash_assets.c
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libelrun.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The shared library exports only what include/elrun/*.h declare (a version
# script generated from them); the el__ internals stay inside.  The static
# archive keeps everything: unit tests, helpers and benches use internals.
# scripts/check-exports.sh (run by make test) checks the result.
$(BUILD)/libelrun.map: $(wildcard include/elrun/*.h) scripts/public-symbols.sh
	@mkdir -p $(dir $@)
	CC='$(CC)' scripts/public-symbols.sh --map > $@.tmp && mv $@.tmp $@

$(BUILD)/libelrun.so: $(LIB_OBJ) $(BUILD)/libelrun.map
	$(CC) -shared -Wl,-soname,libelrun.so.0 \
	    -Wl,--version-script=$(BUILD)/libelrun.map $(LDFLAGS) -o $@ \
	    $(LIB_OBJ) $(LDLIBS)

$(BUILD)/elrun: $(CLI_OBJ) $(BUILD)/libelrun.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libelrun.a $(LDLIBS)

# pc_file PREFIX: the pkg-config file's text for an install under PREFIX.
# Libs carries an rpath for a prefix the dynamic linker does not search
# (anything but /usr and /usr/local: those get `ldconfig` at install), so an
# installed program finds libelrun.so without LD_LIBRARY_PATH.  The private
# part is what libelrun.a needs and nothing more (t0010 checks it): libuv's
# archive (Debian ships it as libuv_a.a, named by libuv-static.pc), jansson,
# nettle, and the http-parser archive the shared library has inside it.
system_prefix = $(filter /usr /usr/local,$(patsubst %/,%,$(1)))
pc_rpath = $(if $(call system_prefix,$(1)),,-Wl$(comma)-rpath$(comma)$${libdir} )
pc_file = printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: elrun\nDescription: elastic distributed-training runtime\nVersion: %s\nRequires.private: %s\nLibs: -L$${libdir} %s-lelrun\nLibs.private: -l:libhttp_parser.a\nCflags: -I$${includedir}\n' \
	    '$(1)' '$(VERSION)' 'libuv-static jansson nettle' '$(call pc_rpath,$(1))'

$(BUILD)/elrun.pc: Makefile
	@mkdir -p $(dir $@)
	$(call pc_file,$(PREFIX)) > $@

$(BUILD)/unit_tests: $(UNIT_OBJ) $(BUILD)/libelrun.a
	$(CC) $(LDFLAGS) -o $@ $(UNIT_OBJ) $(BUILD)/libelrun.a $(LDLIBS)

# Each fuzz target (tests/fuzz/fuzz_NAME.c) built with a plain main() that
# replays its corpus (tests/fuzz/corpus/NAME), so `make test` exercises them
# without clang.
$(BUILD)/fuzz_replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c $(BUILD)/libelrun.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< tests/fuzz/replay_main.c \
	    $(BUILD)/libelrun.a $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libelrun.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libelrun.a $(LDLIBS) $(BENCH_LIBS_$*)

$(BUILD)/examples/%: examples/%.c $(BUILD)/libelrun.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(EXAMPLE_CFLAGS_$*) $(LDFLAGS) -o $@ $< $(BUILD)/libelrun.a $(LDLIBS) $(EXAMPLE_LIBS_$*)

$(BUILD)/tests/helpers/%: tests/helpers/%.c $(BUILD)/libelrun.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libelrun.a $(LDLIBS)

unit: $(BUILD)/unit_tests
	$(BUILD)/unit_tests

test: deps
	@$(MAKE) --no-print-directory all
	@tests/run.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh

demo-elastic: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo-elastic.sh

fuzz: $(FUZZ_NAMES:%=tests/fuzz/fuzz_%.c) $(LIB_SRC)
	@mkdir -p build-fuzz
	for n in $(FUZZ_NAMES); do \
	    clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
	        $(PKG_CFLAGS) -o build-fuzz/fuzz_$$n tests/fuzz/fuzz_$$n.c $(LIB_SRC) $(LDLIBS) || exit 1; \
	    echo "run: build-fuzz/fuzz_$$n -max_total_time=60 tests/fuzz/corpus/$$n"; \
	done

bench: all
	@bench/run.sh

# Builds only what it installs (not the example, which needs OpenBLAS), and
# writes the .pc for this PREFIX even if `make` ran with another.
install: $(BUILD)/elrun $(BUILD)/libelrun.a $(BUILD)/libelrun.so
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	    $(DESTDIR)$(PREFIX)/include/elrun $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/elrun $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/libelrun.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libelrun.so $(DESTDIR)$(PREFIX)/lib/libelrun.so.0
	ln -sf libelrun.so.0 $(DESTDIR)$(PREFIX)/lib/libelrun.so
	install -m 644 include/elrun/*.h $(DESTDIR)$(PREFIX)/include/elrun/
	$(call pc_file,$(PREFIX)) > $(DESTDIR)$(PREFIX)/lib/pkgconfig/elrun.pc
	[ ! -f docs/elrun.1 ] || install -m 644 docs/elrun.1 $(DESTDIR)$(PREFIX)/share/man/man1/
ifeq ($(DESTDIR),)
ifneq ($(call system_prefix,$(PREFIX)),)
	@ldconfig 2>/dev/null || echo "make install: run 'sudo ldconfig' so that programs find $(PREFIX)/lib/libelrun.so.0"
endif
endif

clean:
	rm -rf build build-san build-san-* build-tsan build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
