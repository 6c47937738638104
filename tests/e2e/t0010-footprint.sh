#!/usr/bin/env bash
# The agent's footprint and libelrun's hygiene: libcurl (and its ~30
# dependencies) is loaded only by an etcd backend, never by a job on the
# built-in store; a missing libcurl is a clear one-line error for etcd; the
# shared library exports its public API and nothing else.
#
# A missing libcurl is simulated with ELRUN_LIBCURL, the library name the
# etcd client dlopen()s (src/common/curl_dl.c; default libcurl.so.4), pointed
# at a file that does not exist.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"

# The worker: copy its parent's (the agent's) memory map to $1.
cat >"$T/maps.sh" <<'EOS'
#!/bin/sh
cat "/proc/$PPID/maps" > "$1"
EOS
chmod +x "$T/maps.sh"

test_expect_success 'elrun and libelrun.so do not link libcurl' '
    readelf -d "$ELRUN" | contains "NEEDED.*libuv"
    refute grep -q libcurl <(readelf -d "$ELRUN")
    refute grep -q libcurl <(readelf -d "$ROOT/$BUILD/libelrun.so")
'

test_expect_success 'a standalone job: the running agent has no libcurl mapped' '
    "$ELRUN" --standalone --nproc-per-node=1 --no-python "$T/maps.sh" "$T/maps.std"
    grep -q "/elrun$" "$T/maps.std"            # the agent'"'"'s map, not the worker'"'"'s
    grep -q libuv "$T/maps.std"
    refute grep -q libcurl "$T/maps.std"
'

test_expect_success 'a c10d job (built-in store): no libcurl mapped' '
    PORT=$(free_port)
    "$ELRUN" --nnodes=1 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$PORT \
        --rdzv-id=fp --nproc-per-node=1 --no-python "$T/maps.sh" "$T/maps.c10d"
    grep -q "/elrun$" "$T/maps.c10d"
    refute grep -q libcurl "$T/maps.c10d"
'

test_expect_success 'an etcd job loads libcurl (so the cases above can see it)' '
    PORT=$(free_port)   # no etcd there: the agent keeps trying, libcurl loaded
    "$ELRUN" --nnodes=1 --rdzv-backend=etcd --rdzv-endpoint=127.0.0.1:$PORT \
        --rdzv-id=fp --nproc-per-node=1 --no-python /bin/true \
        >"$T/etcd.out" 2>&1 &
    pid=$!; track_pid $pid
    wait_until "grep -q libcurl /proc/$pid/maps" 20
    kill -TERM $pid; wait $pid || true
'

test_expect_success 'etcd without libcurl: one clear line, prompt failure' '
    PORT=$(free_port)
    st=0
    ELRUN_LIBCURL=$T/none/libcurl.so.4 timeout 60 "$ELRUN" --nnodes=1 \
        --rdzv-backend=etcd --rdzv-endpoint=127.0.0.1:$PORT --rdzv-id=fp \
        --nproc-per-node=1 --no-python /bin/true 2>"$T/nocurl.err" || st=$?
    cat "$T/nocurl.err"
    ((st != 0 && st != 124))
    grep -q "rendezvous: etcd: cannot load $T/none/libcurl.so.4 (.*No such file" "$T/nocurl.err"
    refute grep -q "etcd: etcd:" "$T/nocurl.err"
    grep -q "need libcurl; install it" "$T/nocurl.err"
'

test_expect_success 'etcd with a library that is not libcurl: named as such' '
    PORT=$(free_port)
    st=0
    ELRUN_LIBCURL=libc.so.6 timeout 60 "$ELRUN" --nnodes=1 \
        --rdzv-backend=etcd --rdzv-endpoint=127.0.0.1:$PORT --rdzv-id=fp \
        --nproc-per-node=1 --no-python /bin/true 2>"$T/badcurl.err" || st=$?
    ((st != 0 && st != 124))
    grep -q "libc.so.6 has no curl_global_init: not a usable libcurl" "$T/badcurl.err"
'

test_expect_success 'libelrun.so exports exactly the functions of include/elrun/*.h' '
    "$ROOT/scripts/check-exports.sh" "$ROOT/$BUILD/libelrun.so"
'

if readelf -d "$ROOT/$BUILD/libelrun.so" | contains 'NEEDED.*lib[at]san'; then
    test_skip 'make install and link a program' "$BUILD is a sanitizer build (the program would need the runtime first)"
else
test_expect_success 'make install builds only what it installs; a program links the installed library' '
    make -C "$ROOT" -n install BUILD="$T/nobuild" PREFIX="$T/p" >"$T/install.n"
    grep -q "libelrun.so" "$T/install.n"
    refute grep -q "examples/" "$T/install.n"       # the example needs OpenBLAS
    make -C "$ROOT" --no-print-directory install BUILD="$BUILD" PREFIX="$T/p" >/dev/null
    cat >"$T/prog.c" <<EOC
#include <stdio.h>
#include <elrun/err.h>
#include <elrun/etcd.h>
int main(void)
{
    struct el_etcd *c;
    char err[256];
    struct el_etcd_opts o = {.endpoints = "127.0.0.1:12x"};
    int rc = el_etcd_open(&c, &o, err, sizeof err);
    printf("%d %s | %s\n", rc, el_strerror(EL_ETLS), err);
    return 0;
}
EOC
    cc -o "$T/prog" "$T/prog.c" $(PKG_CONFIG_PATH="$T/p/lib/pkgconfig" pkg-config --cflags --libs elrun)
    # No LD_LIBRARY_PATH: the rpath in the .pc of a non-system prefix.
    "$T/prog" >"$T/prog.out"
    cat "$T/prog.out"
    grep -q "^-5009 TLS failure .*| etcd: endpoint .127.0.0.1:12x. is not host:port" "$T/prog.out"
    # (ldd read whole first: grep -q ending a pipe early is a SIGPIPE
    # failure under pipefail)
    ldd "$T/prog" >"$T/prog.ldd"
    grep -q "libelrun.so.0 => $T/p/lib/" "$T/prog.ldd"
'

# The first program of docs/TRAINING.md (the block after the marker), built
# against the installed library both ways and run under the installed elrun.
pc() { PKG_CONFIG_PATH="$T/p/lib/pkgconfig" pkg-config "$@"; }
test_expect_success 'docs/TRAINING.md'"'"'s first program builds (shared and --static) and runs with 2 workers' '
    awk "/^<!-- t0010: hello.c -->\$/ {m = 1; next} m && /^\`\`\`c\$/ {m = 2; next}
         m == 2 && /^\`\`\`\$/ {exit} m == 2" "$ROOT/docs/TRAINING.md" >"$T/hello.c"
    grep -q "int main" "$T/hello.c"
    head -5 "$ROOT/docs/TRAINING.md" | contains "^# Training programs in C"
    [[ $(grep -n "^<!-- t0010: hello.c -->" "$ROOT/docs/TRAINING.md" | cut -d: -f1) -lt 15 ]]
    cc -std=c11 -Wall -Wextra -Werror -o "$T/hello" "$T/hello.c" $(pc --cflags --libs elrun)
    cc -std=c11 -Wall -Wextra -Werror -static -o "$T/hello.static" "$T/hello.c" \
        $(pc --static --cflags --libs elrun) 2>"$T/static.ld"
    grep -q "libelrun.so.0 => $T/p/lib/" <(ldd "$T/hello")
    refute grep -q "NEEDED" <(readelf -d "$T/hello.static")
    for prog in hello hello.static; do
        "$T/p/bin/elrun" --standalone --nproc-per-node=2 --no-python "$T/$prog" >"$T/$prog.out"
        cat "$T/$prog.out"
        [[ $(sort "$T/$prog.out" | paste -sd/) == "rank 0 of 2: sum of ranks 1/rank 1 of 2: sum of ranks 1" ]]
    done
    # Outside elrun: the message, not a crash.
    st=0; env -u RANK "$T/hello" 2>"$T/hello.err" || st=$?
    [[ $st == 1 ]] && grep -q "^hello: RANK is not set: not started by elrun" "$T/hello.err"
'

test_expect_success 'pkg-config --static lists exactly what libelrun.a needs' '
    libs=$(pc --static --libs-only-l elrun)
    echo "$libs"
    # Enough: a program with the whole archive links (nothing undefined) ...
    echo "int main(void) { return 0; }" >"$T/empty.c"
    cc -o "$T/all" "$T/empty.c" -Wl,--whole-archive "$T/p/lib/libelrun.a" -Wl,--no-whole-archive \
        -Wl,--as-needed ${libs/-lelrun/}
    readelf -d "$T/all" >"$T/all.dyn"
    # ... and nothing more: every shared library it names is used (kept
    # under --as-needed), every archive is needed (the link fails without
    # it); -lpthread -ldl -lrt are libuv'"'"'s, inside libc on this glibc.
    for l in ${libs/-lelrun/}; do
        case $l in
        -lpthread|-ldl|-lrt) ;;
        -l:*.a|-luv_a)
            rest=$(echo " ${libs/-lelrun/} " | sed "s| $l | |")
            refute cc -o "$T/less" "$T/empty.c" -Wl,--whole-archive "$T/p/lib/libelrun.a" \
                -Wl,--no-whole-archive $rest 2>/dev/null ;;
        *)  grep -q "NEEDED.*\[lib${l#-l}\.so" "$T/all.dyn" || { echo "not needed: $l"; exit 1; } ;;
        esac
    done
'

test_expect_success 'make install into /usr/local (DESTDIR): no rpath, the .pc of a system prefix' '
    make -C "$ROOT" --no-print-directory install BUILD="$BUILD" PREFIX=/usr/local DESTDIR="$T/dest" >"$T/dest.out"
    grep -qx "Libs: -L\${libdir} -lelrun" "$T/dest/usr/local/lib/pkgconfig/elrun.pc"
    grep -qx "prefix=/usr/local" "$T/dest/usr/local/lib/pkgconfig/elrun.pc"
    grep -qx "Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lelrun" "$T/p/lib/pkgconfig/elrun.pc"
    refute grep -q ldconfig "$T/dest.out"          # a staged install runs no ldconfig
'
fi

test_done
