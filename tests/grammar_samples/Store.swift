import Foundation

/// A key-value store backed by UserDefaults.
public struct Store {
    /// Reads a value.
    func value(forKey key: String) -> String? { defaults.string(forKey: key) }
}

protocol Persisting { func save() }
