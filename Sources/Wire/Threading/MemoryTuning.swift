import CLinuxShims

/// Process-wide allocator settings for programs that move large messages (services, benchmarks).
public enum MemoryTuning {
    /// Message buffers up to 16 MiB (every frame cap is below it) are reused from the heap, and up
    /// to 64 MiB of freed heap is kept rather than handed back and faulted in again. See
    /// `frienso_keep_large_buffers`.
    public static func keepLargeBuffers() {
        frienso_keep_large_buffers(16 << 20, 64 << 20)
    }
}
