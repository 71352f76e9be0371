"""The documentation site's generated reference, from the code itself so it cannot drift.

Each module renders one page of ``docs/reference/`` (``PAGES`` in ``docsgen.pages``) from what the
code already declares: the constructs' signatures and docstrings (griffe, read statically, so no
CDK import), the management API's OpenAPI schemas (Powertools' resolvers), the CLI's argparse
parser, the contract's metrics and alarms, the testing kit's docstrings. ``docsgen.hook`` is the
MkDocs hook that adds the pages at build time; ``tests/docs/test_reference.py`` renders them in
process. Every page is deterministic: the same code renders the same bytes.
"""
