#!/bin/sh
# Wrapper for the postgres contender (paths as run): like the shoal-private preset, it removes the state and
# ledger files before every round and keeps the database, where round 1 registered the users.
rm -f /tmp/s18/pgc.state /tmp/s18/pgc.state.ledger
exec /tmp/s18/shoal-main "$@"
