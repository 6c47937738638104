/* fuzz_members.c -- libFuzzer target for the elastic rendezvous' member
 * lists, which agents read back from the store or from etcd (any agent, or
 * anything else with access, may have written them): whatever the bytes,
 * parsing answers "list" or EL_EFORMAT without crashing, and a list it
 * accepts formats back to text that parses to the same members.  The input
 * is also scanned as an expect list.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/err.h"
#include "rendezvous/elastic.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    (void)el__rdzv_expected(text, "h#1#00000000");
    struct el__rdzv_member *m = NULL, *again = NULL;
    int n = 0, n2 = 0;
    if (el__rdzv_parse_members(text, &m, &n) == 0) {
        size_t len;
        char *out = el__rdzv_format_members(7, m, n, 1, &len);
        if (!out || strlen(out) != len ||
            el__rdzv_parse_members(out, &again, &n2) != 0 || n2 != n)
            abort();
        for (int i = 0; i < n; i++)
            if (strcmp(m[i].id, again[i].id) ||
                strcmp(m[i].name, again[i].name) || m[i].lws != again[i].lws ||
                m[i].port != again[i].port || m[i].lease != again[i].lease)
                abort();
        char *list = el__rdzv_expect_list(m, n, "extra", NULL, NULL);
        if (!list || (n > 0 && !el__rdzv_expected(list, m[0].id)) ||
            !el__rdzv_expected(list, "extra"))
            abort();
        free(list);
        free(out);
        free(again);
        free(m);
    }
    free(text);
    return 0;
}
