package demo

/** Parses configuration files. */
class ConfigParser(path: String) {
  /** Reads every key. */
  def keys(): Seq[String] = lines.map(_.split("=").head)
}

object ConfigParser { def apply(p: String) = new ConfigParser(p) }
