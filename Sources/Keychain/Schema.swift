/// The store's schema, versioned by PRAGMA user_version. Each migration runs
/// in the transaction that bumps the version, so a crash mid-upgrade leaves
/// the old schema intact; never edit a shipped migration, append a new one.
enum Schema {
    static let migrations: [String] = [
        // 1: tokens, items, attributes, lookup index, slot and reference retirement.
        """
        CREATE TABLE tokens (
            token_id TEXT PRIMARY KEY NOT NULL,
            label TEXT NOT NULL,
            serial TEXT NOT NULL,
            slot_id INTEGER NOT NULL UNIQUE,
            present INTEGER NOT NULL DEFAULT 1,
            created INTEGER NOT NULL,
            user_salt BLOB, user_kdf TEXT, user_wrapped BLOB,
            so_salt BLOB, so_kdf TEXT, so_wrapped BLOB,
            user_pin_initialized INTEGER NOT NULL DEFAULT 0,
            user_failures INTEGER NOT NULL DEFAULT 0,
            so_failures INTEGER NOT NULL DEFAULT 0,
            user_locked INTEGER NOT NULL DEFAULT 0,
            so_locked INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL DEFAULT 10
        );
        CREATE TABLE used_slot_ids (
            slot_id INTEGER PRIMARY KEY NOT NULL,
            token_id TEXT NOT NULL
        );
        CREATE INDEX used_slot_ids_token ON used_slot_ids(token_id);
        CREATE TABLE items (
            id INTEGER PRIMARY KEY,
            pref BLOB NOT NULL UNIQUE,
            token_id TEXT NOT NULL REFERENCES tokens(token_id) ON DELETE CASCADE,
            class INTEGER NOT NULL,
            is_private INTEGER NOT NULL,
            created INTEGER NOT NULL,
            modified INTEGER NOT NULL
        );
        CREATE INDEX items_token_class ON items(token_id, class);
        CREATE TABLE attributes (
            item INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
            type INTEGER NOT NULL,
            value BLOB NOT NULL,
            encrypted INTEGER NOT NULL,
            PRIMARY KEY (item, type)
        ) WITHOUT ROWID;
        CREATE TABLE attr_index (
            item INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
            type INTEGER NOT NULL,
            digest BLOB NOT NULL,
            PRIMARY KEY (item, type)
        ) WITHOUT ROWID;
        CREATE INDEX attr_index_lookup ON attr_index(type, digest);
        CREATE TABLE retired_refs (
            pref BLOB PRIMARY KEY NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE meta (
            key TEXT PRIMARY KEY NOT NULL,
            value BLOB
        ) WITHOUT ROWID;
        """,
        // 2: access groups (see AccessGroups.swift); existing items join the default group.
        """
        ALTER TABLE items ADD COLUMN access_group TEXT NOT NULL DEFAULT 'default';
        """,
        // 3: the lookup index holds only attributes that narrow a search (see
        // `unindexedV3`); the rest are checked per candidate through
        // attr_index's primary key (since 4: attributes'). Every entry of
        // (type, digest) sits at the tail of its own cluster, so each indexed
        // attribute dirtied a page of its own per create: 22 pages per
        // C_CreateObject on average.
        """
        CREATE TABLE attr_lookup (
            type INTEGER NOT NULL,
            digest BLOB NOT NULL,
            item INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
            PRIMARY KEY (type, digest, item)
        ) WITHOUT ROWID;
        CREATE INDEX attr_lookup_item ON attr_lookup(item);
        INSERT INTO attr_lookup (type, digest, item)
            SELECT type, digest, item FROM attr_index WHERE type NOT IN (\(unindexedV3.map(String.init).joined(separator: ", ")));
        DROP INDEX attr_index_lookup;
        """,
        // 4: the digest joins its attribute's row: attr_index had the same key
        // (item, type), so every attribute cost two inserts into two B-trees.
        """
        ALTER TABLE attributes ADD COLUMN digest BLOB;
        UPDATE attributes SET digest =
            (SELECT x.digest FROM attr_index x WHERE x.item = attributes.item AND x.type = attributes.type);
        DROP TABLE attr_index;
        """,
        // 5: the token's consent setting (TokenConsent: 1 ask, 0 off; docs/agent.md
        // "Consent"); tokens made before it keep today's behaviour: off.
        """
        ALTER TABLE tokens ADD COLUMN consent INTEGER NOT NULL DEFAULT 0;
        """,
    ]

    /// Attributes kept out of the lookup index since version 3: flags and
    /// small enumerations, whose values are shared by most items and so do
    /// not narrow a search (a find names a class or a label or ID along with
    /// them). CKA_TRUSTED stays indexed: trust evaluation looks anchors up by
    /// it. Changing this set needs a new migration that moves the rows.
    static let unindexedV3: Set<AttributeType> = [
        CKA.class, CKA.token, CKA.private, CKA.certificateType, CKA.certificateCategory,
        0x88 /* CKA_JAVA_MIDP_SECURITY_DOMAIN */, 0x8C /* CKA_NAME_HASH_ALGORITHM */,
        CKA.keyType, CKA.sensitive, CKA.encrypt, CKA.decrypt, CKA.wrap, CKA.unwrap, CKA.sign,
        CKA.signRecover, CKA.verify, CKA.verifyRecover, CKA.derive, CKA.startDate, CKA.endDate,
        CKA.modulusBits, CKA.publicExponent, 0x160 /* CKA_VALUE_BITS */, CKA.valueLen, CKA.extractable,
        CKA.local, CKA.neverExtractable, CKA.alwaysSensitive, CKA.keyGenMechanism, CKA.modifiable,
        CKA.copyable, CKA.destroyable, CKA.ecParams, CKA.alwaysAuthenticate, CKA.wrapWithTrusted,
        CKA.allowedMechanisms, 0x4000_0211 /* CKA_WRAP_TEMPLATE */, 0x4000_0212 /* CKA_UNWRAP_TEMPLATE */,
        0x4000_0213 /* CKA_DERIVE_TEMPLATE */, CKA.keysharePKCS8,
    ]

    /// Whether a find on this attribute seeks attr_lookup.
    static func isLookupIndexed(_ type: AttributeType) -> Bool { !unindexedV3.contains(type) }

    static var currentVersion: Int { migrations.count }

    /// For a connection that cannot write: the schema must be current already.
    static func check(_ db: SQLiteConnection, readOnly reason: ReadOnlyReason) throws {
        let version = try db.query("PRAGMA user_version") { Int($0.int(0)) }.first ?? 0
        if version > currentVersion {
            throw KeychainError.storage("keychain.db has schema version \(version), newer than this keyshare (\(currentVersion))")
        }
        if version < currentVersion {
            throw KeychainError.readOnlyStore(
                "keychain.db has schema version \(version) and this keyshare needs \(currentVersion), "
                    + "an upgrade that cannot be written (\(reason))")
        }
    }

    static func migrate(_ db: SQLiteConnection) throws {
        let version = try db.query("PRAGMA user_version") { Int($0.int(0)) }.first ?? 0
        guard version < currentVersion else {
            if version > currentVersion {
                throw KeychainError.storage("keychain.db has schema version \(version), newer than this keyshare (\(currentVersion))")
            }
            return
        }
        try db.exec("BEGIN IMMEDIATE")
        do {
            // Re-read under the write lock: another process may have migrated meanwhile.
            let v = try db.query("PRAGMA user_version") { Int($0.int(0)) }.first ?? 0
            if v < currentVersion {
                for m in migrations[v...] { try db.exec(m) }
                try db.exec("PRAGMA user_version = \(currentVersion)")
            }
            try db.exec("COMMIT")
        } catch {
            try? db.exec("ROLLBACK")
            throw error
        }
    }
}
