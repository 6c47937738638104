/* curl_dl.c -- libcurl, loaded when the first HTTP client (etcd, the
 * Kubernetes controller) opens.
 *
 * libcurl pulls in about thirty shared libraries (TLS stacks, Kerberos,
 * LDAP, ...) whose constructors would run in every agent at start; a job on
 * the built-in store never needs them.  So libelrun does not link libcurl:
 * el__curl_load() dlopen()s it once per process and fills el__curl with
 * the functions the client calls.  The library name is libcurl.so.4 (the
 * soname of every libcurl since 7.16), or $ELRUN_LIBCURL when set (a path
 * or another soname such as libcurl-gnutls.so.4; the tests point it at a
 * missing file to check the error).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/curl_dl.h"

struct el__curl_api el__curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_err[512];

/* Resolve one symbol into *slot; 0 or -ELIBBAD (with load_err set). */
static int sym(void *lib, const char *soname, const char *name, void *slot)
{
    void *p = dlsym(lib, name);
    if (!p) {
        snprintf(load_err, sizeof load_err,
                 "%s has no %s: not a "
                 "usable libcurl (set ELRUN_LIBCURL to another one)",
                 soname, name);
        return -ELIBBAD;
    }
    /* POSIX dlsym returns an object pointer that holds a function's
     * address; copy it bytewise into the function-pointer slot. */
    memcpy(slot, &p, sizeof p);
    return 0;
}

static void load(void)
{
    const char *name = getenv("ELRUN_LIBCURL");
    if (!name || !*name)
        name = "libcurl.so.4";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(load_err, sizeof load_err,
                 "cannot load %s (%s): the etcd rendezvous and client "
                 "and the Kubernetes controller need libcurl; install it "
                 "(Debian: apt-get install libcurl4)",
                 name, why ? why : "not found");
        load_rc = -ELIBACC;
        return;
    }
    struct el__curl_api a;
#define EL_CURL_SYM_(field, fn)                    \
    if ((load_rc = sym(lib, name, #fn, &a.field))) \
        goto fail;
    EL_CURL_SYMS(EL_CURL_SYM_)
#undef EL_CURL_SYM_
    CURLcode rc = a.global_init(CURL_GLOBAL_ALL);
    if (rc != CURLE_OK) {
        snprintf(load_err, sizeof load_err, "curl_global_init: %s",
                 a.easy_strerror(rc));
        load_rc = -ENOMEM;
        goto fail;
    }
    el__curl = a;
    return; /* the library stays loaded for the life of the process */
fail:
    dlclose(lib);
}

int el__curl_load(char *err, size_t errlen)
{
    pthread_once(&load_once, load);
    if (load_rc && err && errlen)
        snprintf(err, errlen, "%s", load_err);
    return load_rc;
}
