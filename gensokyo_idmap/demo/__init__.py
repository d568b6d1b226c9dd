"""``gensokyo-idmap demo``: the daemon fed by an emulated QQ platform, to watch the bridge
work without QQ credentials (docs/demo.md).

:mod:`.script` is the pure part (who says what, when; the lines printed);
:mod:`.run` starts the platform, the daemon and the users. Only the CLI imports this
package, and only it among the daemon's packages imports the test kit.
"""
