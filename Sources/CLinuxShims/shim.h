#include <sys/prctl.h>

/// Names the calling thread (15 characters at most): what `top -H`, `perf` and debuggers show.
static inline int frienso_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, name, 0, 0, 0);
}

#include <malloc.h>

/// Bytes the process's heap has handed out and not taken back (glibc's mallinfo2): what the
/// benchmarks report as a structure's memory.
static inline size_t frienso_heap_in_use(void) {
    return mallinfo2().uordblks;
}
