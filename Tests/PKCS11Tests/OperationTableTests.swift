import CPKCS11
import Testing
@testable import PKCS11

/// The session's operation table (OperationTable.swift, issue 13): one
/// inline slot per kind in place of a Dictionary; it must behave as the
/// Dictionary did for every kind.
struct OperationTableTests {
    final class Marker: Operation {}

    @Test func eachKindHasItsOwnSlot() {
        var t = OperationTable()
        #expect(t.isEmpty)
        var markers: [OperationKind: Marker] = [:]
        for k in OperationKind.allCases {
            let m = Marker()
            markers[k] = m
            t[k] = m
        }
        #expect(!t.isEmpty)
        for k in OperationKind.allCases { #expect(t[k] === markers[k], "\(k)") }
        #expect(Array(t).map(\.0) == OperationKind.allCases, "iteration in allCases order")
        for k in OperationKind.allCases {
            t[k] = nil
            #expect(t[k] == nil)
            // The others stay.
            for o in OperationKind.allCases where o != k {
                let later = OperationKind.allCases.firstIndex(of: o)! > OperationKind.allCases.firstIndex(of: k)!
                #expect((t[o] != nil) == later, "\(o) after removing \(k)")
            }
        }
        #expect(t.isEmpty)
    }

    @Test func builtFromADictionaryAndCleared() {
        let d: [OperationKind: any Operation] = [.digest: Marker(), .sign: Marker()]
        var t = OperationTable(d)
        #expect(t[.digest] === d[.digest])
        #expect(t[.sign] === d[.sign])
        #expect(t[.find] == nil && t[.encrypt] == nil && t[.messageDecrypt] == nil)
        #expect(Array(t).count == 2)
        t.removeAll()
        #expect(t.isEmpty)
        #expect(Array(t).isEmpty)
    }
}
