package demo.cache

/** An in-memory cache with expiry. */
class Cache(private val ttl: Long) {
    /** Returns the value or null once expired. */
    fun get(key: String): String? = entries[key]?.value
}

object Caches {
    fun default(): Cache = Cache(60)
}
