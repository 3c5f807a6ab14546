"""Which files a search looks at: discovery, ignore rules, languages, paths inside the roots, and
what a walk left out.
"""
