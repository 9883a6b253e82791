"""The bounds on what a person or client may send about a tenant or an agent: one table, read by
the models, the validation, the forms and the docs (docs/configuration.md, "Limits").

Lengths are in characters, as Django's `max_length` counts them. They keep an agent's card
small (its largest public card is about 80 KB of ASCII text: tests/agents/test_limits.py
builds it), every page that shows an agent readable, and every row within what PostgreSQL
stores without a second look.
"""

from __future__ import annotations

# A tenant.
TENANT_NAME = 200

# An agent's own fields, each on its card.
AGENT_NAME = 200
AGENT_DESCRIPTION = 4_000
AGENT_VERSION = 50
URL = 2_000  # documentation, icon and provider URLs; the executor kinds' URLs too
PROVIDER_ORGANIZATION = 200

# Media types: default input and output modes, and a skill's own. RFC 6838 caps a type name
# and a subtype name at 127 characters each; registered types are far shorter.
MODES = 10
MODE = 127

# Skills: how many on the public card and how many more on the extended one, each field, and
# the whole list as compact JSON (what bounds the card whatever the mix of fields).
SKILLS = 20
SKILL_ID = 100
SKILL_NAME = 200
SKILL_DESCRIPTION = 1_000
SKILL_TAGS = 10
SKILL_TAG = 50
SKILL_EXAMPLES = 5
SKILL_EXAMPLE = 500
SKILL_SECURITY_REQUIREMENTS = 4
SKILL_SCHEMES = 4  # in one security requirement
SKILL_SCHEME_NAME = 64
SKILL_SCOPES = 10
SKILL_SCOPE = 64
SKILLS_JSON = 64_000

# An executor config as a whole, as compact JSON (openai's system prompt, 100,000, fits with
# the rest), and the free-form parts of one (python's init_kwargs).
EXECUTOR_CONFIG_JSON = 128_000
JSON_DEPTH = 20
INIT_KWARGS = 50
INIT_KWARG_NAME = 64
CLASS_PATH = 300

# A token issuer (agents.models.Issuer): its accepted audiences, and the scopes each operation
# needs. The issuer URL, its jwks_uri, name and user claim are bounded by their model fields.
ISSUER_AUDIENCES = 20
ISSUER_AUDIENCE = 500
ISSUER_SCOPES = 20  # per operation
ISSUER_SCOPE = 200
