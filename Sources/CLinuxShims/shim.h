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

/// Keeps freed large buffers in the heap instead of returning each to the kernel: glibc maps a
/// buffer over its (dynamic) threshold with mmap and trims the heap top past 2× that, so every
/// 1 MiB message buffer cost page faults and page zeroing (measured: ~10% of the CPU of the media
/// benchmark). Buffers below `mmap_threshold` come from the heap; up to `trim_threshold` of free
/// heap is kept.
static inline void frienso_keep_large_buffers(int mmap_threshold, int trim_threshold) {
    mallopt(M_MMAP_THRESHOLD, mmap_threshold);
    mallopt(M_TRIM_THRESHOLD, trim_threshold);
}
