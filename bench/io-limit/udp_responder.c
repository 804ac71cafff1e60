/*
 * udp_responder.c - the "I/O limit" bar for shoal's UDP tracker benchmarks.
 *
 * What it is for: on a small machine the kernel's UDP path (syscalls, socket
 * buffers, loopback softirq) is most of what a UDP tracker costs. This program
 * does the least work a BEP 15 tracker can do and still give well-formed
 * answers, so the responses it sends per CPU-second are the ceiling a real
 * tracker can approach on the same machine, in the same session, under the
 * same load generator. shoal's bar is 85% of this figure
 * (shoal-bench compare runs it as the preset "io-limit").
 *
 * What it does: one UDP socket, receive up to 64 datagrams per recvmmsg(),
 * answer them with one sendmmsg(). No store, no state, no checks beyond
 * lengths:
 *   connect  (16 bytes, action 0) -> action 0, transaction id, a connection id
 *   announce (>= 98 bytes, action 1) -> 20 bytes: action 1, transaction id,
 *                                      interval 1800, 0 leechers, 0 seeders
 *                                      (an empty peer list)
 *   scrape   (16 + 20*N bytes, action 2) -> action 2, transaction id, then
 *                                      seeders/completed/leechers = 0 per hash
 *                                      (N capped at 74, what fits in a packet)
 *   anything else is dropped.
 * The connection id is not checked on announce/scrape: that is the point of
 * "no state" - it is a bar to measure against, not a tracker.
 *
 * Build: cc -O2 -o udp_responder udp_responder.c
 * Run:   ./udp_responder 127.0.0.1 23000      (IPv6 literals work too)
 * It prints "listening on ADDR PORT" once bound, and runs until killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64
#define MAX_HASHES 74

static void put32(unsigned char *p, uint32_t v) { v = htonl(v); memcpy(p, &v, 4); }

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]); return 2; }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV}, *ai;
    if (getaddrinfo(argv[1], argv[2], &hints, &ai) != 0) { fprintf(stderr, "bad address\n"); return 2; }
    int fd = socket(ai->ai_family, SOCK_DGRAM, 0), buf = 8 << 20;  /* like aquatic_udp's recv buffer */
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) { perror("socket/bind"); return 1; }
    printf("listening on %s %s\n", argv[1], argv[2]);
    fflush(stdout);

    static unsigned char in[BATCH][1500], out[BATCH][8 + 12 * MAX_HASHES];
    static struct sockaddr_storage addr[BATCH];
    static struct iovec iin[BATCH], iout[BATCH];
    static struct mmsghdr rx[BATCH], tx[BATCH];
    for (int i = 0; i < BATCH; i++) {
        iin[i] = (struct iovec){in[i], sizeof in[i]};
        iout[i].iov_base = out[i];
        rx[i].msg_hdr = (struct msghdr){.msg_name = &addr[i], .msg_iov = &iin[i], .msg_iovlen = 1};
    }
    for (;;) {
        for (int i = 0; i < BATCH; i++) rx[i].msg_hdr.msg_namelen = sizeof addr[i];
        int n = recvmmsg(fd, rx, BATCH, MSG_WAITFORONE, NULL);
        if (n < 0) continue;  /* EINTR and the like */
        int m = 0;
        for (int i = 0; i < n; i++) {
            unsigned char *q = in[i], *r = out[m];
            size_t len = rx[i].msg_len, rlen;
            if (len < 16) continue;
            uint32_t action;
            memcpy(&action, q + 8, 4);
            action = ntohl(action);
            memcpy(r + 4, q + 12, 4);                       /* transaction id */
            if (action == 0) {                 /* connect */
                put32(r, 0);
                put32(r + 8, 0x73686f61); put32(r + 12, 0x6c10c0de); /* some connection id */
                rlen = 16;
            } else if (action == 1 && len >= 98) {          /* announce */
                put32(r, 1); put32(r + 8, 1800); put32(r + 12, 0); put32(r + 16, 0);
                rlen = 20;
            } else if (action == 2 && len >= 36) {          /* scrape */
                size_t hashes = (len - 16) / 20;
                if (hashes > MAX_HASHES) hashes = MAX_HASHES;
                put32(r, 2);
                memset(r + 8, 0, 12 * hashes);
                rlen = 8 + 12 * hashes;
            } else {
                continue;
            }
            iout[m].iov_len = rlen;
            tx[m].msg_hdr = (struct msghdr){.msg_name = &addr[i], .msg_namelen = rx[i].msg_hdr.msg_namelen,
                                            .msg_iov = &iout[m], .msg_iovlen = 1};
            m++;
        }
        for (int sent = 0, tries = 0; sent < m && tries < 4; tries++) {  /* bounded retry */
            int k = sendmmsg(fd, tx + sent, m - sent, 0);
            if (k > 0) sent += k;
        }
    }
}
