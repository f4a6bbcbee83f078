#ifndef FRIENSO_SQLITE_SETTINGS_H
#define FRIENSO_SQLITE_SETTINGS_H

/// SQLite's process-wide settings, made when the process loads, before any connection opens
/// (`sqlite3_config` refuses them after SQLite initialises): the multi-thread threading mode
/// (no mutex per connection: every connection of the project is used by one thread at a time,
/// through GRDB's serialized access or a list it is taken from) and no memory statistics (no
/// global mutex and counters around every allocation; Debian builds SQLite without lookaside, so
/// a statement's small allocations all reach malloc). `FRIENSO_SQLITE_MUTEXES=serialized` in the
/// environment keeps SQLite's defaults, for A/B runs (issue 16, item 136).
///
/// Returns what was done: 0 when both settings were made; 1 when the environment kept the
/// defaults; 2 when SQLite refused them (it had initialised before).
int frienso_sqlite_settings_outcome(void);

#endif
