import FriensoProto
import FriensoTesting
import Foundation
import Testing

@Suite("generated code")
struct GeneratedCodeTests {
    @Test("the committed protobuf-c and Swift glue is what proto/generate produces",
          .enabled(if: Repository.which("protoc-c") != nil,
                   "protoc-c is not installed (apt-get install protobuf-c-compiler): cannot check the generated code"))
    func committedCodeIsFresh() async throws {
        let scratch = try TemporaryDirectory("frienso-generate")
        defer { scratch.remove() }
        let result = try await ProcessHarness.run(Repository.root.appendingPathComponent("proto/generate").path, ["--out", scratch.path])
        #expect(result.status == 0, "proto/generate failed: \(result.output)")
        for dir in ["Sources/FriensoProtoC", "Sources/FriensoProto/Generated", "Sources/Wire/Generated"] {
            let fresh = try files(under: scratch.url.appendingPathComponent(dir))
            let committed = try files(under: Repository.root.appendingPathComponent(dir))
            #expect(fresh.keys.sorted() == committed.keys.sorted(), "\(dir): file lists differ; run proto/generate and commit")
            for (path, content) in fresh where committed[path] != content {
                Issue.record("\(dir)/\(path) is stale: run proto/generate and commit the result")
            }
        }
    }

    /// `frienso:read` lets the gateway and the clients send a call again without a key, so a
    /// change marked as a read could be applied twice. The marks follow the names: every
    /// `Get…`, `List…`, `Show…`, `Search…` and `ExportMyData` rpc is a read, no rpc named for a
    /// change is, and the reads named otherwise are this list (a new one is added here on
    /// purpose, after reading its handler).
    @Test("reads are marked in the contracts, and nothing that changes state is")
    func readsAreMarked() {
        let readPrefixes = ["Get", "List", "Show", "Search", "ExportMyData"]
        let changePrefixes = ["Set", "Add", "Remove", "Delete", "Create", "Update", "Start", "End", "Extend", "Send", "Respond",
                              "Cancel", "Block", "Unblock", "Raise", "Resolve", "Report", "Register", "Unregister", "Import", "Erase",
                              "Edit", "Change", "Link", "Unlink", "Login", "Logout", "Reset", "Request", "Revoke", "Allow", "Upload",
                              "Finish", "Attach", "Poke", "CheckIn", "Verify", "Answer"]
        let readsByOtherNames: Set = [
            "accounts.WhoAmI", "accounts.ValidateSession", "accounts.ContactDetails", "accounts.FindUsers", "accounts.MatchContacts",
            "accounts.ProfilesSnapshot", "geo.FriendsLocations", "geo.Nearby", "geo.Navigate", "geo.ClosestPlace", "geo.LatestLocation",
            "geo.CheckInAccess", "geo.ViewShareLink", "geo.PlacesSnapshot", "social.RecommendFriends", "social.GraphSnapshot", "social.CircleSnapshot", "social.CircleOf",
            "social.CircleRequestsFor"]
        for method in ProtoIndex.methods {
            let named = readPrefixes.contains { method.name.hasPrefix($0) }
            let change = changePrefixes.contains { method.name.hasPrefix($0) } && !named && method.name != "CheckInAccess"
            #expect(!(change && method.readOnly), "\(method.fullName) is named for a change and marked frienso:read")
            #expect(method.readOnly == (named || readsByOtherNames.contains(method.fullName)),
                    "\(method.fullName): frienso:read is \(method.readOnly), its name says otherwise (see this test)")
        }
        #expect(CommonMethods.ping("geo").readOnly)
    }

    /// The generator on a contract of the test's own: `frienso:read` goes with an access mark
    /// into the generated method, and is refused twice, with arguments, or away from an rpc.
    @Test("frienso:read is generated with the access beside it, and refused where it means nothing",
          .enabled(if: Repository.which("python3") != nil, "python3 is not installed: cannot run proto/swiftgen.py"))
    func readAnnotation() async throws {
        func generate(_ service: String, before: String = "") async throws -> (status: Int32, output: String, swift: String) {
            let scratch = try TemporaryDirectory("frienso-swiftgen")
            defer { scratch.remove() }
            let folder = "\(scratch.path)/proto/frienso/x/v1"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try """
                syntax = "proto3";
                package frienso.x.v1;
                message AReq {}
                message AResp {}
                \(before)
                service XService {
                \(service)
                }
                """.write(toFile: "\(folder)/x.proto", atomically: true, encoding: .utf8)
            let result = try await ProcessHarness.run(Repository.which("python3")!, [
                Repository.root.appendingPathComponent("proto/swiftgen.py").path, "\(scratch.path)/proto", scratch.path])
            let swift = (try? String(contentsOfFile: "\(scratch.path)/x.pb.swift", encoding: .utf8)) ?? ""
            return (result.status, result.output, swift)
        }
        let good = try await generate("""
              // frienso:internal(gateway, edge)
              // frienso:read
              rpc A(AReq) returns (AResp);
              rpc B(AReq) returns (AResp);
            """)
        #expect(good.status == 0, "\(good.output)")
        #expect(good.swift.contains(#"name: "A", access: .internal, callers: ["gateway", "edge"], readOnly: true)"#), "\(good.swift)")
        #expect(good.swift.contains(#"name: "B", access: .authenticated)"#), "an rpc without the mark is no read")
        for (service, before, message) in [
            ("  // frienso:read\n  // frienso:read\n  rpc A(AReq) returns (AResp);", "", "frienso:read stands once above an rpc and takes no arguments"),
            ("  // frienso:read(gateway)\n  rpc A(AReq) returns (AResp);", "", "frienso:read stands once above an rpc and takes no arguments"),
            ("  rpc A(AReq) returns (AResp);", "// frienso:read", "a frienso annotation must stand directly above an rpc"),
        ] {
            let bad = try await generate(service, before: before)
            #expect(bad.status != 0 && bad.output.contains(message), "\(service): \(bad.status) \(bad.output)")
        }
    }

    @Test("every rpc has a unique wire name and Ping is never declared by a contract")
    func methodTable() {
        let names = ProtoIndex.methods.map(\.fullName)
        #expect(Set(names).count == names.count)
        #expect(!names.contains { $0.hasSuffix(".Ping") })
        #expect(ProtoIndex.methods.first { $0.fullName == "accounts.ValidateSession" }?.access == .internal)
        #expect(ProtoIndex.methods.first { $0.fullName == "accounts.Login" }?.access == .public)
        #expect(ProtoIndex.methods.first { $0.fullName == "accounts.WhoAmI" }?.access == .authenticated)
    }

    private func files(under url: URL) throws -> [String: Data] {
        var result: [String: Data] = [:]
        let base = url.standardizedFileURL.path
        guard let walker = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey]) else { return [:] }
        for case let file as URL in walker where (try file.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true {
            let path = String(file.standardizedFileURL.path.dropFirst(base.count + 1))
            result[path] = try Data(contentsOf: file)
        }
        return result
    }
}
