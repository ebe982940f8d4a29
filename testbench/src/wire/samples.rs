//! Sample frames for tests of the blocks that build or parse frames: one of each extension-header shape the
//! RC requester and responder send, with random field values from the caller's random source.

use super::headers::*;
use super::opcode::*;
use super::{IpHeader, MacAddr, RoceFrame, RocePacket};

/// An RC frame (IPv4, rxe defaults, random addresses, IP ID and BTH fields) for each entry of `lens`; entry i
/// takes shape i mod 7: SEND_ONLY, WRITE_ONLY (RETH), READ_REQUEST (RETH, no payload), ACKNOWLEDGE (AETH),
/// FETCH_ADD (AtomicETH), WRITE_ONLY_WITH_IMMEDIATE (RETH + ImmDt), ATOMIC_ACKNOWLEDGE (AETH + AtomicAckETH).
/// Shapes with a payload carry `lens[i]` random bytes.
pub fn rc_frames(rng: &mut dyn FnMut() -> u64, lens: &[usize]) -> Vec<RoceFrame> {
    let mut r32 = || rng() as u32;
    let mut out = Vec::new();
    for (i, &len) in lens.iter().enumerate() {
        let reth = |dma_len: u32, r: &mut dyn FnMut() -> u32| {
            ExtHeader::Reth(Reth { va: (r() as u64) << 32 | r() as u64, rkey: r(), dma_len })
        };
        let u64r = |r: &mut dyn FnMut() -> u32| (r() as u64) << 32 | r() as u64;
        let (op, ext, pay): (u8, Vec<ExtHeader>, usize) = match i % 7 {
            0 => (RC_SEND_ONLY, vec![], len),
            1 => (RC_RDMA_WRITE_ONLY, vec![reth(len as u32, &mut r32)], len),
            2 => {
                let l = r32();
                (RC_RDMA_READ_REQUEST, vec![reth(l, &mut r32)], 0)
            }
            3 => (RC_ACKNOWLEDGE, vec![ExtHeader::Aeth(Aeth::ack(AETH_ACK_UNLIMITED, r32() & 0xFF_FFFF))], 0),
            4 => {
                let e = AtomicEth { va: u64r(&mut r32), rkey: r32(), swap_add: u64r(&mut r32), compare: u64r(&mut r32) };
                (RC_FETCH_ADD, vec![ExtHeader::AtomicEth(e)], 0)
            }
            5 => {
                let rt = reth(len as u32, &mut r32);
                (RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, vec![rt, ExtHeader::ImmDt(ImmDt { imm: r32() })], len)
            }
            _ => {
                let a = Aeth::ack(AETH_ACK_UNLIMITED, r32() & 0xFF_FFFF);
                (RC_ATOMIC_ACKNOWLEDGE, vec![ExtHeader::Aeth(a), ExtHeader::AtomicAckEth(AtomicAckEth { orig: u64r(&mut r32) })], 0)
            }
        };
        let mut bth = Bth::new(op, r32() & 0xFF_FFFF, r32() & 0xFF_FFFF);
        bth.se = r32() & 1 == 1;
        bth.ack_req = r32() & 1 == 1;
        let payload: Vec<u8> = (0..pay).map(|_| r32() as u8).collect();
        let mac = |r: &mut dyn FnMut() -> u32| {
            let (a, b) = (r(), r());
            MacAddr([a as u8, (a >> 8) as u8, (a >> 16) as u8, (a >> 24) as u8, b as u8, (b >> 8) as u8])
        };
        let (m1, m2) = (mac(&mut r32), mac(&mut r32));
        let (ip1, ip2, sport) = (r32(), r32(), 0xC000 | r32() as u16);
        let mut f = RoceFrame::ipv4(m1, m2, ip1.into(), ip2.into(), sport, RocePacket::new(bth, ext, payload));
        if let IpHeader::V4(h) = &mut f.ip {
            h.id = r32() as u16;
        }
        out.push(f);
    }
    out
}

/// `n` masked-atomic requests (no payload; random addresses and fields, as [`rc_frames`]): even i a masked
/// COMPARE_SWAP (MaskedCmpSwapETH, 44 bytes: the longest RC header, 98 bytes in all), odd i a masked
/// FETCH_ADD (MaskedFetchAddETH, 28 bytes).
pub fn masked_atomic_requests(rng: &mut dyn FnMut() -> u64, n: usize) -> Vec<RoceFrame> {
    let mut out = rc_frames(rng, &vec![0; n]);
    for (i, f) in out.iter_mut().enumerate() {
        let (va, rkey) = (rng(), rng() as u32);
        let (op, ext) = if i % 2 == 0 {
            let e = MaskedCmpSwapEth { va, rkey, swap: rng(), compare: rng(), swap_mask: rng(), compare_mask: rng() };
            (MASKED_COMPARE_SWAP, ExtHeader::MaskedCmpSwapEth(e))
        } else {
            (MASKED_FETCH_ADD, ExtHeader::MaskedFetchAddEth(MaskedFetchAddEth { va, rkey, add: rng(), field_boundary: rng() }))
        };
        let mut bth = f.packet.bth;
        bth.opcode = op;
        f.packet = RocePacket::new(bth, vec![ext], Vec::new());
    }
    out
}

/// A UD SEND frame (IPv4, random addresses, IP ID, TOS and TTL, BTH fields and DETH) for each entry of `lens`:
/// even i a SEND_ONLY (DETH), odd i a SEND_ONLY_WITH_IMMEDIATE (DETH + ImmDt), each with `lens[i]` random
/// payload bytes.
pub fn ud_frames(rng: &mut dyn FnMut() -> u64, lens: &[usize]) -> Vec<RoceFrame> {
    let mut r32 = || rng() as u32;
    let mut out = Vec::new();
    for (i, &len) in lens.iter().enumerate() {
        let deth = ExtHeader::Deth(Deth { qkey: r32(), resv: 0, src_qp: r32() & 0xFF_FFFF });
        let (op, ext) = if i % 2 == 0 {
            (UD_SEND_ONLY, vec![deth])
        } else {
            (UD_SEND_ONLY_WITH_IMMEDIATE, vec![deth, ExtHeader::ImmDt(ImmDt { imm: r32() })])
        };
        let mut bth = Bth::new(op, r32() & 0xFF_FFFF, r32() & 0xFF_FFFF);
        bth.se = r32() & 1 == 1;
        let payload: Vec<u8> = (0..len).map(|_| r32() as u8).collect();
        let (a, b) = (r32(), r32());
        let m1 = MacAddr([2, a as u8, (a >> 8) as u8, (a >> 16) as u8, (a >> 24) as u8, b as u8]);
        let m2 = MacAddr([2, (b >> 8) as u8, (b >> 16) as u8, 1, 2, 3]);
        let (ip1, ip2, sport) = (r32(), r32(), 0xC000 | r32() as u16);
        let mut f = RoceFrame::ipv4(m1, m2, ip1.into(), ip2.into(), sport, RocePacket::new(bth, ext, payload));
        if let IpHeader::V4(h) = &mut f.ip {
            h.id = r32() as u16;
            h.tos = r32() as u8;
            h.ttl = 1 + (r32() % 255) as u8;
        }
        out.push(f);
    }
    out
}

/// `frames` carried over IPv6 instead (random addresses; traffic class 0, flow label 0, hop limit 64, as rxe
/// sends them): every second frame when `every_other`, else all.
pub fn over_ipv6(rng: &mut dyn FnMut() -> u64, frames: Vec<RoceFrame>, every_other: bool) -> Vec<RoceFrame> {
    frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            if every_other && i % 2 == 0 {
                return f;
            }
            let src = (rng() as u128) << 64 | rng() as u128;
            let dst = (rng() as u128) << 64 | rng() as u128;
            RoceFrame::ipv6(f.eth.src, f.eth.dst, src.into(), dst.into(), f.udp.sport, f.packet)
        })
        .collect()
}
