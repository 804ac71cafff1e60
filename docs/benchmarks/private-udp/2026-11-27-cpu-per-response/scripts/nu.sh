#!/bin/sh
# Wrapper for the nouser contender: private mode without the user look-up (an experiment
# build); like the shoal-private preset it removes the state and ledger files before every
# round and keeps the database, where round 1 registered the users.
rm -f /tmp/s19/nu.state /tmp/s19/nu.state.ledger
exec /work/wt/nouser-target/release/shoal "$@"
