import Testing
@testable import KeySharing

/// Spec §2 selector names: 2025 (canonical hyphen form), deprecated underscore
/// aliases, legacy 2016 names and the `-p12` folder item types.
@Suite struct SelectorTests {
    static let suffixes: [(String, ShareFilter)] = [
        ("all", .all), ("all-user", .allUser), ("device", .device), ("signature", .signature),
        ("encryption", .encryption), ("authentication", .authentication), ("no-filter", .noFilter),
    ]

    @Test func every2025Selector() {
        #expect(ShareSelector("purebred2025.rsa.pkcs-12") == .pkcs12)
        for (suffix, filter) in Self.suffixes {
            #expect(ShareSelector("purebred2025.select.\(suffix)") == .folder(filter))
            #expect(ShareSelector("purebred2025.zip.\(suffix)") == .zip(filter))
            #expect(ShareSelector("purebred2025.select.\(suffix)-p12") == .folderItem(filter))
            #expect(ShareSelector.folder(filter).identifier == "purebred2025.select.\(suffix)")
            #expect(ShareSelector(ShareSelector.zip(filter).identifier) == .zip(filter))
        }
    }

    @Test func underscoreAliases() {
        #expect(ShareSelector("purebred2025.rsa.pkcs_12") == .pkcs12)
        #expect(ShareSelector("purebred2025.select.all_user") == .folder(.allUser))
        #expect(ShareSelector("purebred2025.zip.no_filter") == .zip(.noFilter))
        #expect(ShareSelector("purebred2025.select.no_filter_p12") == .folderItem(.noFilter))
    }

    @Test func legacyNames() {
        #expect(ShareSelector("com.rsa.pkcs-12") == .pkcs12)
        for (suffix, filter) in Self.suffixes {
            #expect(ShareSelector("purebred.select.\(suffix)") == .folder(filter))
            #expect(ShareSelector("purebred.zip.\(suffix)") == .zip(filter))
        }
        #expect(ShareSelector("purebred.select.all_user") == .folder(.allUser))
    }

    @Test func rejectsUnknown() {
        for bad in ["", "purebred2025.select.", "purebred2025.select.piv", "purebred2025.zip.all-p12x",
                    "purebred2026.select.all", "com.rsa.pkcs-11", "purebred2025.other.all"] {
            #expect(ShareSelector(bad) == nil, "\(bad)")
        }
    }
}
