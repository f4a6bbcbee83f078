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

#include <stdint.h>
#include <sys/epoll.h>

/// An epoll instance closed on exec (the reactor's wait), or -1 with errno set.
static inline int frienso_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

/// Registers `fd` for input (level-triggered, as `poll(2)` sees it) under `tag`.
static inline int frienso_epoll_add(int epfd, int fd, uint64_t tag) {
    struct epoll_event event = { .events = EPOLLIN, .data = { .u64 = tag } };
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
}

/// Waits as `epoll_wait` does and writes the tags of the descriptors that are ready to `tags`
/// (at most `capacity`, at most 256). `struct epoll_event` is packed on x86-64: its fields are
/// read here, in C, not from Swift. - Returns: how many are ready, 0 on timeout, -1 with errno.
static inline int frienso_epoll_wait_tags(int epfd, uint64_t *tags, int capacity, int timeout) {
    struct epoll_event events[256];
    if (capacity > 256) capacity = 256;
    int count = epoll_wait(epfd, events, capacity, timeout);
    for (int i = 0; i < count; i++) tags[i] = events[i].data.u64;
    return count;
}
