"""The public surface is deliberate: adding or dropping a name must show up in review."""

import gensokyo_idmap


def test_exported_members() -> None:
    assert sorted(gensokyo_idmap.__all__) == [
        "BadInputError", "ConflictError", "IdentityGraph", "IdentityKey", "IdentityStore",
        "IdmapError", "LmdbIdentityStore", "NoUsableIdentityError", "NotFoundError", "OpenId",
        "PlatformError", "RUin", "RawId", "Resolution", "SchemaVersionError", "StoreError",
        "UnionId", "Usable", "VUin", "format_ruin_text", "openid_of_app", "parse_client_input",
        "parse_key", "parse_ruin_text", "parse_vuin",
    ]
    for name in gensokyo_idmap.__all__:
        assert hasattr(gensokyo_idmap, name), name
