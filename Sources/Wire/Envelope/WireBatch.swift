import Foundation
import FriensoProto

/// Several envelopes in one message: a batch frame (`docs/protocol.md`, "Batch frames").
///
/// Every message costs libzmq its own work on both sides of a connection (the pipe, a wake-up of
/// its I/O thread, a `send(2)` or `recv(2)` when nothing else is queued) and, on a CurveZMQ
/// connection, a crypto box of its own with two buffers and copies around it. A client that has
/// several calls ready at once for one peer (the gateway forwarding what a reactor turn read
/// from many phones; a service's calls under load) sends them as one message, and the host
/// answers the replies it has ready for that peer in one message too (`docs/benchmarks.md`,
/// issue 16, item 134).
///
/// The frame is the byte `marker`, then each envelope as protobuf writes a length-delimited
/// field's value: its length as a varint, then its bytes. No envelope's own encoding starts with
/// `marker` (a protobuf key of field 0 is invalid; the empty envelope is the empty frame), so a
/// host of an older build refuses a batch as a malformed envelope instead of misreading it.
/// A client sends batches only to a host whose latest heartbeat reply carried `feature`, and a
/// host answers in batches only requests that came in one.
public enum WireBatch {
    /// The first byte of a batch frame.
    static let marker: UInt8 = 0
    /// The bit of `Envelope.features` a host sets in its heartbeat replies when it takes batches.
    static let feature: UInt32 = 1
    /// An envelope larger than this goes in a message of its own: a photo's chunk is not copied
    /// into a batch, and a batch stays small next to a socket's message size cap.
    static let largestMember = 16 << 10
    /// A batch is closed (sent) before it would pass this many bytes.
    static let largest = 256 << 10
    /// A batch is sent once it holds this many envelopes, without waiting for the turn's end:
    /// the peer starts on them while this side makes the rest.
    static let members = 16
    /// A frame with more envelopes than this is refused whole: this build sends at most
    /// `members`, and a member of the deployment must not make a host answer thousands of
    /// (empty) envelopes for one message.
    static let mostMembersTaken = 1_024

    /// Whether hosts take batches: `FRIENSO_WIRE_BATCHES=off` makes them say they do not (so no
    /// client sends any), for A/B runs.
    public static let enabledByEnvironment = ProcessInfo.processInfo.environment["FRIENSO_WIRE_BATCHES"] != "off"

    /// Whether `bytes` is a batch frame (by its first byte; `forEachRecord` checks the rest).
    static func isBatch(_ bytes: UnsafeRawBufferPointer) -> Bool {
        !bytes.isEmpty && bytes[0] == marker
    }

    /// Hands `body` each envelope of a batch frame, a slice of `bytes`, in order. - Returns:
    /// false (and hands over nothing) when `bytes` is not a well-formed batch of one to
    /// `mostMembersTaken` envelopes (a length past the end, a length of more than five bytes,
    /// nothing after the marker, too many): the whole frame is checked first, so a malformed
    /// batch has no envelope taken from it. Two reads of the lengths, no array per message.
    static func forEachRecord(in bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        guard isBatch(bytes) else { return false }
        let members = UnsafeRawBufferPointer(rebasing: bytes[1...])
        var check = WireReader(members)
        var count = 0
        while !check.atEnd {
            guard count < mostMembersTaken, check.delimited() != nil else { return false }
            count += 1
        }
        guard count > 0 else { return false }
        var reader = WireReader(members)
        while let record = reader.delimited() { body(record) }
        return true
    }

    /// The size of a batch frame holding envelopes of these sizes.
    static func size(ofMembers sizes: some Sequence<Int>) -> Int {
        sizes.reduce(1) { $0 + WireWriter.varintSize(UInt64($1)) + $1 }
    }

    /// Writes a batch frame into `buffer` (exactly `size(ofMembers:)` of `sizes` bytes): each
    /// member's length, then its bytes, which `write` writes into the slice it is given.
    static func write(into buffer: UnsafeMutableRawBufferPointer, sizes: some Collection<Int>, _ write: (Int, UnsafeMutableRawBufferPointer) -> Void) {
        var writer = WireWriter(buffer)
        writer.byte(marker)
        for (index, size) in sizes.enumerated() {
            writer.varint(UInt64(size))
            let start = writer.offset
            write(index, UnsafeMutableRawBufferPointer(rebasing: buffer[start..<start + size]))
            writer.skip(size)
        }
        precondition(writer.offset == buffer.count, "the batch took \(writer.offset) bytes of \(buffer.count)")
    }
}

/// Replies a host has ready for one peer in this reactor turn, as a batch frame being built
/// (`HostLoop`): each reply is written into it as it is made (a relayed reply's fields are only
/// valid then), and the frame is sent once the turn's work is done. A class over storage of its
/// own, kept from turn to turn: no array to copy on write, nothing zeroed before it is written.
final class PendingReplies {
    var routingID: [UInt8]
    var hasDelimiter: Bool
    /// The frame so far: the marker, then each reply's length and bytes (`used` bytes of it).
    private var storage: UnsafeMutableRawBufferPointer
    private var used = 1
    private(set) var count = 0
    /// Where the first reply's own bytes start (after its length): a lone reply goes out as a
    /// plain message from there.
    private var firstStart = 0

    init(routingID: [UInt8], hasDelimiter: Bool) {
        self.routingID = routingID
        self.hasDelimiter = hasDelimiter
        storage = .allocate(byteCount: 4 << 10, alignment: 8)
        storage[0] = WireBatch.marker
    }

    deinit { storage.deallocate() }

    /// Whether a reply of `size` bytes still fits in this batch.
    func fits(_ size: Int) -> Bool {
        used + WireWriter.varintSize(UInt64(size)) + size <= WireBatch.largest
    }

    /// Room for one more reply of `size` bytes (its length written before it), for the caller
    /// to write the reply into; valid until the next call on this batch.
    func reserve(_ size: Int) -> UnsafeMutableRawBufferPointer {
        let lengthSize = WireWriter.varintSize(UInt64(size))
        let end = used + lengthSize + size
        if end > storage.count {
            let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(end, storage.count * 2), alignment: 8)
            grown.copyMemory(from: UnsafeRawBufferPointer(rebasing: storage[..<used]))
            storage.deallocate()
            storage = grown
        }
        var writer = WireWriter(UnsafeMutableRawBufferPointer(rebasing: storage[used..<used + lengthSize]))
        writer.varint(UInt64(size))
        let start = used + lengthSize
        if count == 0 { firstStart = start }
        count += 1
        used = end
        return UnsafeMutableRawBufferPointer(rebasing: storage[start..<end])
    }

    /// The message to send: the batch frame, or a lone reply's own bytes.
    var message: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: storage[(count == 1 ? firstStart : 0)..<used])
    }

    /// Empties the batch for the next turn, keeping its storage (unless a burst grew it past
    /// 64 KiB: then back to its first size, so an idle peer's batch holds little).
    func reset() {
        used = 1
        count = 0
        firstStart = 0
        if storage.count > 64 << 10 {
            storage.deallocate()
            storage = .allocate(byteCount: 4 << 10, alignment: 8)
            storage[0] = WireBatch.marker
        }
    }
}
