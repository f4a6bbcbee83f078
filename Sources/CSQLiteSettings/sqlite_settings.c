#include "sqlite_settings.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static int outcome = 2;

// A constructor, not a call from Swift: it runs when the process loads, before any Swift code
// can open a connection (in the services, the benchmark, the CLI and the test bundle alike), so
// every connection of the process opens in the same mode. `sqlite3_config` is variadic, which
// Swift cannot call.
__attribute__((constructor))
static void frienso_sqlite_settings(void) {
    const char *mutexes = getenv("FRIENSO_SQLITE_MUTEXES");
    if (mutexes != NULL && strcmp(mutexes, "serialized") == 0) {
        outcome = 1;
        return;
    }
    int threading = sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
    int statistics = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    outcome = (threading == SQLITE_OK && statistics == SQLITE_OK) ? 0 : 2;
}

int frienso_sqlite_settings_outcome(void) {
    return outcome;
}
