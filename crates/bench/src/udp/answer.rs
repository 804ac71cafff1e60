//! Checking one UDP answer against the request it answers: what a datagram is worth,
//! decided from its bytes and the request's kind alone.
//!
//! Kept apart from the socket loop so that the rules of a valid answer read in one place
//! and are tested by feeding bytes, without a socket: the action must be the request's,
//! a connect answer exactly 16 bytes, an announce no more peers than `numwant`, a scrape
//! one entry per hash asked. Matching the transaction id to its request is the socket
//! loop's job (it owns the slots).

use shoal_proto::udp::{ConnectionId, Response};

use crate::stats::{ErrorKind, Op};

/// A valid answer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Answer {
    /// To a connect: the connection id to use from now on.
    Connected(ConnectionId),
    /// To an announce (the peers it carried) or a scrape (none).
    Peers(usize),
}

/// The request an answer must match.
#[derive(Clone, Copy, Debug, Default)]
pub struct Asked {
    pub op: Op,
    pub numwant: u32,
    /// Info hashes in a scrape.
    pub hashes: u16,
}

/// Checks `data`, an answer to `asked` (`truncated`: it did not fit the receive buffer;
/// `ipv6`: peers are 18-byte entries). An error response is `Err(ErrorResponse)`.
pub fn check(data: &[u8], truncated: bool, ipv6: bool, asked: Asked) -> Result<Answer, ErrorKind> {
    if truncated {
        return Err(ErrorKind::InvalidResponse);
    }
    let peers = |n: usize| {
        if asked.op == Op::Announce && n <= asked.numwant as usize {
            Ok(Answer::Peers(n))
        } else {
            Err(ErrorKind::InvalidResponse)
        }
    };
    match Response::parse(data, ipv6) {
        Err(_) => Err(ErrorKind::InvalidResponse),
        Ok(Response::Error { .. }) => Err(ErrorKind::ErrorResponse),
        Ok(Response::Connect { connection_id, .. }) => {
            if asked.op == Op::Connect && data.len() == 16 {
                Ok(Answer::Connected(connection_id))
            } else {
                Err(ErrorKind::InvalidResponse)
            }
        }
        Ok(Response::AnnounceV4 { peers: p, .. }) => peers(p.len()),
        Ok(Response::AnnounceV6 { peers: p, .. }) => peers(p.len()),
        Ok(Response::Scrape { stats, .. }) => {
            if asked.op == Op::Scrape && stats.len() == asked.hashes as usize {
                Ok(Answer::Peers(0))
            } else {
                Err(ErrorKind::InvalidResponse)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::udp::{AnnounceHeader, ScrapeStats, TransactionId};
    use shoal_proto::CompactPeerV4;

    fn bytes(r: Response<'_>) -> Vec<u8> {
        let mut out = [0u8; 256];
        let n = r.write(&mut out).unwrap();
        out[..n].to_vec()
    }

    #[test]
    fn answers_must_match_their_request() {
        let tid = TransactionId(7);
        let ask = |op, numwant, hashes| Asked {
            op,
            numwant,
            hashes,
        };
        let connect = bytes(Response::Connect {
            transaction_id: tid,
            connection_id: ConnectionId(42),
        });
        let header = AnnounceHeader {
            transaction_id: tid,
            interval: 1800,
            leechers: 1,
            seeders: 2,
        };
        let peers = [CompactPeerV4([127, 0, 0, 9, 0, 80]); 3];
        let announce = bytes(Response::AnnounceV4 {
            header,
            peers: &peers,
        });
        let stats = [ScrapeStats::new(1, 2, 3); 2];
        let scrape = bytes(Response::Scrape {
            transaction_id: tid,
            stats: &stats,
        });
        let error = bytes(Response::Error {
            transaction_id: tid,
            message: b"connection id expired",
        });
        let invalid = Err(ErrorKind::InvalidResponse);
        let cases = [
            (
                &connect,
                ask(Op::Connect, 0, 0),
                Ok(Answer::Connected(ConnectionId(42))),
            ),
            (&connect, ask(Op::Announce, 5, 0), invalid),
            (&announce, ask(Op::Announce, 3, 0), Ok(Answer::Peers(3))),
            (&announce, ask(Op::Announce, 2, 0), invalid),
            (&announce, ask(Op::Scrape, 3, 2), invalid),
            (&scrape, ask(Op::Scrape, 0, 2), Ok(Answer::Peers(0))),
            (&scrape, ask(Op::Scrape, 0, 3), invalid),
            (
                &error,
                ask(Op::Announce, 5, 0),
                Err(ErrorKind::ErrorResponse),
            ),
        ];
        for (data, asked, want) in cases {
            assert_eq!(check(data, false, false, asked), want, "{asked:?}");
        }
        let short = &connect[..15];
        assert_eq!(check(short, false, false, ask(Op::Connect, 0, 0)), invalid);
        assert_eq!(
            check(&connect, true, false, ask(Op::Connect, 0, 0)),
            invalid
        );
    }
}
