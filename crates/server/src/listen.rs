//! Listening TCP sockets as every shoal listener binds them (HTTP, HTTPS, admin).
//!
//! `SO_REUSEPORT`, so that during an upgrade the new process binds the same addresses
//! while the old one still holds them (the kernel splits new connections between them
//! until the old one exits), and so that each HTTP worker has a listener of its own. An
//! IPv6 wildcard takes IPv6 only, or `[::]` would collide with a `0.0.0.0` listener on
//! the same port.

use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// A non-blocking listener on `addr` with room for `backlog` pending connections.
pub fn tcp(addr: SocketAddr, backlog: i32) -> std::io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    Ok(socket.into())
}
