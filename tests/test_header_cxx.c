/* test_header_cxx.c — include/sjkvarn.h compiles as C++ (C++11, -Wall -Wextra -pedantic
 * -Werror), alone and in a translation unit that uses the cache API, so engines written
 * in C++ can include it directly. Runs the system C++ compiler ($CXX, else c++/g++/
 * clang++) from the repository root; skips when none is installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *find_cxx(void)
{
    const char *env = getenv("CXX");
    if (env && *env) return env;
    static const char *const names[] = {"c++", "g++", "clang++"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", names[i]);
        if (system(cmd) == 0) return names[i];
    }
    return NULL;
}

TEST(test_header_compiles_as_cxx)
{
    const char *cxx = find_cxx();
    if (!cxx) SKIP("no C++ compiler installed");
    FILE *f = fopen("include/sjkvarn.h", "r");
    if (!f) SKIP("not run from the repository root");
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -std=c++11 -Wall -Wextra -pedantic -Werror -fsyntax-only -x c++ include/sjkvarn.h", cxx);
    CHECKF(system(cmd) == 0, "%s", cmd);
    snprintf(cmd, sizeof cmd,
             "printf '#include \"sjkvarn.h\"\\nint main() { sjk_cache_params p = sjk_cache_params_default();"
             " sjk_cache *c = 0; sjk_status s = sjk_cache_create(&p, &c); sjk_cache_free(c);"
             " return s == SJK_OK ? 0 : 1; }\\n' | %s -std=c++11 -Wall -Wextra -pedantic -Werror -Iinclude"
             " -fsyntax-only -x c++ -",
             cxx);
    CHECKF(system(cmd) == 0, "%s", cmd);
}

int main(void)
{
    RUN(test_header_compiles_as_cxx);
    return test_summary();
}
