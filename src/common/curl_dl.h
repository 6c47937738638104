/* curl_dl.h -- libcurl loaded at run time, one loader for every module that
 * speaks HTTP (the etcd client, the Kubernetes controller).
 *
 * libelrun does not link libcurl: every curl function goes through el__curl,
 * which el__curl_load() fills on first use.  curl's headers still give the
 * types and constants.  Internal to libelrun.
 */
#ifndef ELRUN_CURL_DL_H
#define ELRUN_CURL_DL_H

#include <stddef.h>

#include <curl/curl.h>

#define EL_CURL_SYMS(X)                              \
    X(global_init, curl_global_init)                 \
    X(easy_init, curl_easy_init)                     \
    X(easy_cleanup, curl_easy_cleanup)               \
    X(easy_reset, curl_easy_reset)                   \
    X(easy_setopt, curl_easy_setopt)                 \
    X(easy_perform, curl_easy_perform)               \
    X(easy_getinfo, curl_easy_getinfo)               \
    X(easy_strerror, curl_easy_strerror)             \
    X(easy_escape, curl_easy_escape)                 \
    X(free, curl_free)                               \
    X(slist_append, curl_slist_append)               \
    X(slist_free_all, curl_slist_free_all)           \
    X(multi_init, curl_multi_init)                   \
    X(multi_cleanup, curl_multi_cleanup)             \
    X(multi_add_handle, curl_multi_add_handle)       \
    X(multi_remove_handle, curl_multi_remove_handle) \
    X(multi_perform, curl_multi_perform)             \
    X(multi_poll, curl_multi_poll)                   \
    X(multi_info_read, curl_multi_info_read)

struct el__curl_api {
#define EL_CURL_FIELD_(field, fn) __typeof__(fn) *field;
    EL_CURL_SYMS(EL_CURL_FIELD_)
#undef EL_CURL_FIELD_
};

/* Valid (non-NULL) only after el__curl_load() returned 0. */
extern struct el__curl_api el__curl;

/* Load libcurl (libcurl.so.4, or $ELRUN_LIBCURL) once per process and call
 * curl_global_init.  Thread-safe.  Returns 0, -ELIBACC when the library
 * cannot be loaded, -ELIBBAD when it lacks a function, -ENOMEM when curl
 * cannot initialise; on error writes a one-line message without a module
 * prefix into err (may be NULL).  Later calls return the first call's
 * result. */
int el__curl_load(char *err, size_t errlen);

#endif
