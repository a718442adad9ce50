import ArgumentParser
import Keychain

/// `keyshare delete`: removes the named items (an identity's label names its
/// certificate and its keys). Needs the PIN: private items are only visible
/// to an unlocked token, and deleting keys is not for a passer-by.
struct DeleteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete an item (by persistent reference) or every item with a label.")

    @Argument(help: "A persistent reference (as `list` prints it) or a label.", completion: StoreCompletion.items) var item: String
    @OptionGroup var selection: TokenSelection
    @OptionGroup var pin: PINOptions
    @Flag(help: "JSON output: every item removed, with its persistent reference and PKCS #11 URI.") var json = false

    func run() throws {
        let ctx = try Context.open()
        let token = try ctx.token(selection)
        let key = try ctx.unlock(token, pin)
        let items = try ctx.resolveItems(item, token: token, key: key)
        // Described before they go: afterwards the references resolve to nothing.
        let rows = items.map { ItemRow($0, token: token) }
        try ctx.store.transaction {
            for i in items { try ctx.store.delete(i.reference) }
        }
        if json { return try Console.json(["removed": rows]) }
        Console.out("deleted \(items.count) item\(items.count == 1 ? "" : "s"): "
            + rows.map { "\($0.itemClass) \"\($0.label)\" (\($0.reference))" }.joined(separator: ", "))
    }
}
