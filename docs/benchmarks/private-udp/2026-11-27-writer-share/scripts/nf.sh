#!/bin/sh
# Wrapper for the noflush contender (paths as run): like the shoal-private preset, it removes the state and
# ledger files before every round and keeps the database, where round 1 registered the users.
rm -f /tmp/s18/nf.state /tmp/s18/nf.state.ledger
exec /tmp/s18/shoal-main "$@"
