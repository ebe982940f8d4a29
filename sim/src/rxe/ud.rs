//! UD (`--conn UD`, `ibv_ud_pingpong`): what our side checks in each UD receive, and what the UD frames on
//! the link carry.
//!
//! A UD receive as rxe 6.1 completes it (`rxe_resp.c` `execute` → `send_data_in` with the
//! `union rdma_network_hdr`, then `do_complete`): the receive buffer starts with a 40-byte GRH area — for
//! RoCEv2 over IPv4, 20 zero bytes and then the packet's IPv4 header as it arrived (`ip_hdr(skb)`); over
//! IPv6, the packet's IPv6 header (`ipv6_hdr(skb)`) — and the payload follows it; the completion's
//! `byte_len` is the payload + 40, its `src_qp` the DETH's source QP, and `IBV_WC_GRH` is set.
//! [`UdRecvCheck`] checks exactly that of every receive our side completes, and keeps the GRH areas so that a
//! run can compare them with the GRH areas the VM's frames in the capture make ([`UdWire::from_vm`]'s
//! `ip_headers`), byte for byte.
//!
//! [`scan_pcap`] reads the link's capture: per direction the UD opcodes, AckReq, the DETH's Q_Key and source
//! QP, the PSNs (rxe's UD requester numbers its packets one by one from the SQ PSN the tool set at RTS), the
//! IP TTL and the UDP source ports.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use anyhow::{Context, Result};
use testbench::model::{WcFlags, WcOpcode, WcStatus, WorkCompletion};
use testbench::wire::frame::{parse_ethernet, ud_grh_area, Frame, IpHeader};

use super::verbs::UD_GRH_ROOM;

/// Problems kept as text (the count goes on).
const MAX_PROBLEMS: usize = 10;
/// GRH areas kept for the comparison with the capture.
const MAX_KEPT: usize = 20_000;

/// The IPv4 total length of a RoCEv2 UD SEND_ONLY of `payload` bytes: IPv4 (20) + UDP (8) + BTH (12) + DETH
/// (8) + payload + pad + ICRC (4).
pub fn ud_send_ip_len(payload: u32) -> u32 {
    20 + 8 + 12 + 8 + payload.next_multiple_of(4) + 4
}

/// The checks of our side's UD receive completions.
#[derive(Clone, Debug, Default)]
pub struct UdRecvCheck {
    /// Receive completions checked.
    pub checked: u64,
    /// Completions that failed a check, and the first [`MAX_PROBLEMS`] reasons.
    pub bad: u64,
    pub problems: Vec<String>,
    /// The completions' `src_qp` values.
    pub src_qps: BTreeSet<u32>,
    /// The GRH areas, in completion order (the first [`MAX_KEPT`]).
    pub grh: Vec<[u8; 40]>,
    /// The TTLs (IPv4) or hop limits (IPv6) of the headers in the GRH areas (what the VM's kernel sent).
    pub ttls: BTreeSet<u8>,
}

impl UdRecvCheck {
    /// Check one successful receive completion `wc` of a `payload`-byte SEND from the peer's QP `peer_qpn` at
    /// `peer_ip` to `our_ip`; `area` is the receive buffer's first 40 bytes as our endpoint wrote them.
    pub fn check(&mut self, wc: &WorkCompletion, area: &[u8], payload: u32, peer_qpn: u32, peer_ip: IpAddr, our_ip: IpAddr) {
        self.checked += 1;
        self.src_qps.insert(wc.src_qp);
        let mut why = Vec::new();
        if wc.status != WcStatus::Success || wc.opcode != WcOpcode::Recv {
            why.push(format!("status {:?}, opcode {:?}", wc.status, wc.opcode));
        }
        if wc.byte_len != payload + UD_GRH_ROOM {
            why.push(format!("byte_len {} (payload {payload} + 40 = {})", wc.byte_len, payload + UD_GRH_ROOM));
        }
        if wc.src_qp != peer_qpn {
            why.push(format!("src_qp 0x{:x}, the peer's QP is 0x{peer_qpn:x}", wc.src_qp));
        }
        if !wc.wc_flags.has(WcFlags::GRH) {
            why.push(format!("no IBV_WC_GRH in wc_flags 0x{:x}", wc.wc_flags.0));
        }
        if wc.wc_flags.has(WcFlags::WITH_IMM) {
            why.push("WITH_IMM on a SEND without immediate".into());
        }
        match <&[u8; 40]>::try_from(area) {
            Err(_) => why.push(format!("GRH area of {} bytes", area.len())),
            Ok(a) => {
                why.extend(grh_problems(a, payload, peer_ip, our_ip));
                self.ttls.insert(if peer_ip.is_ipv4() { a[28] } else { a[7] });
                if self.grh.len() < MAX_KEPT {
                    self.grh.push(*a);
                }
            }
        }
        if !why.is_empty() {
            self.bad += 1;
            if self.problems.len() < MAX_PROBLEMS {
                self.problems.push(format!("receive #{} (wr_id {}): {}", self.checked, wc.wr_id, why.join("; ")));
            }
        }
    }

    /// Compare the kept GRH areas with those the peer's UD frames in the capture make, in order: every
    /// receive must hold the IP header of the frame it came in, unchanged. `None`: they match.
    pub fn compare_with_capture(&self, from_peer: &[[u8; 40]]) -> Option<String> {
        if self.checked as usize > self.grh.len() {
            return Some(format!("only the first {} of {} GRH areas were kept", self.grh.len(), self.checked));
        }
        if self.grh.len() != from_peer.len() {
            return Some(format!("{} GRH areas against {} UD frames from the peer in the capture", self.grh.len(), from_peer.len()));
        }
        self.grh.iter().zip(from_peer).enumerate().find(|(_, (g, h))| g != h).map(|(i, (g, h))| {
            format!("receive #{}: GRH area {:02x?}, the frame's {:02x?}", i + 1, g, h)
        })
    }
}

/// What is wrong with a GRH area of a UD SEND_ONLY of `payload` bytes from `src` to `dst` (rxe: over IPv4, 20
/// zero bytes, then the IPv4 header; over IPv6, the IPv6 header).
pub fn grh_problems(a: &[u8; 40], payload: u32, src: IpAddr, dst: IpAddr) -> Vec<String> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => grh_problems_v4(a, payload, s, d),
        (IpAddr::V6(s), IpAddr::V6(d)) => grh_problems_v6(a, payload, s, d),
        _ => vec![format!("addresses of two families: {src} -> {dst}")],
    }
}

fn grh_problems_v4(a: &[u8; 40], payload: u32, src: Ipv4Addr, dst: Ipv4Addr) -> Vec<String> {
    let mut p = Vec::new();
    if a[..20].iter().any(|&b| b != 0) {
        p.push(format!("the GRH area's first 20 bytes are not zero: {:02x?}", &a[..20]));
    }
    let h = &a[20..];
    if h[0] != 0x45 {
        p.push(format!("IPv4 version/IHL byte 0x{:02x}, not 0x45", h[0]));
    }
    let total = u32::from(u16::from_be_bytes([h[2], h[3]]));
    if total != ud_send_ip_len(payload) {
        p.push(format!("IPv4 total length {total}, a UD SEND_ONLY of {payload} bytes is {}", ud_send_ip_len(payload)));
    }
    if h[9] != 17 {
        p.push(format!("IPv4 protocol {}", h[9]));
    }
    let (s, d) = (Ipv4Addr::new(h[12], h[13], h[14], h[15]), Ipv4Addr::new(h[16], h[17], h[18], h[19]));
    if (s, d) != (src, dst) {
        p.push(format!("IPv4 {s} -> {d}, the frame went {src} -> {dst}"));
    }
    let sum: u32 = h.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
    let folded = (sum & 0xFFFF) + (sum >> 16);
    if (folded & 0xFFFF) + (folded >> 16) != 0xFFFF {
        p.push("IPv4 header checksum does not verify".into());
    }
    p
}

fn grh_problems_v6(h: &[u8; 40], payload: u32, src: Ipv6Addr, dst: Ipv6Addr) -> Vec<String> {
    let mut p = Vec::new();
    if h[0] >> 4 != 6 {
        p.push(format!("IP version {}, not 6", h[0] >> 4));
    }
    // the IPv6 payload is the UDP datagram: the IPv4 total length less the IPv4 header
    let len = u32::from(u16::from_be_bytes([h[4], h[5]]));
    if len != ud_send_ip_len(payload) - 20 {
        p.push(format!("IPv6 payload length {len}, a UD SEND_ONLY of {payload} bytes is {}", ud_send_ip_len(payload) - 20));
    }
    if h[6] != 17 {
        p.push(format!("IPv6 next header {}", h[6]));
    }
    let s = Ipv6Addr::from(<[u8; 16]>::try_from(&h[8..24]).expect("16 bytes"));
    let d = Ipv6Addr::from(<[u8; 16]>::try_from(&h[24..40]).expect("16 bytes"));
    if (s, d) != (src, dst) {
        p.push(format!("IPv6 {s} -> {d}, the frame went {src} -> {dst}"));
    }
    p
}

/// The UD frames of one direction of the link.
#[derive(Clone, Debug, Default)]
pub struct UdDir {
    /// RoCE frames.
    pub frames: u64,
    /// By opcode byte.
    pub opcodes: BTreeMap<u8, u64>,
    /// Frames with BTH AckReq set.
    pub ack_req: u64,
    /// DETH Q_Keys, source QPs; BTH destination QPNs.
    pub qkeys: BTreeSet<u32>,
    pub src_qps: BTreeSet<u32>,
    pub dest_qpns: BTreeSet<u32>,
    /// The first PSN, and how often a PSN was not the one before it + 1.
    pub first_psn: Option<u32>,
    pub psn_breaks: u64,
    /// Payload lengths, IPv4 TTLs or IPv6 hop limits, UDP source ports.
    pub payload_lens: BTreeSet<usize>,
    pub ttls: BTreeSet<u8>,
    pub sports: BTreeSet<u16>,
    /// Frames with BTH SE set.
    pub solicited: u64,
    /// The GRH areas the UD frames make (their IP headers as they were on the wire, an IPv4 one after 20
    /// zero bytes: [`ud_grh_area`]; the first [`MAX_KEPT`]).
    pub ip_headers: Vec<[u8; 40]>,
    last_psn: Option<u32>,
}

impl UdDir {
    /// Frames of this direction with an opcode other than UD SEND_ONLY (0x64) and SEND_ONLY_WITH_IMMEDIATE (0x65).
    pub fn non_ud(&self) -> u64 {
        self.opcodes.iter().filter(|(op, _)| !matches!(op, 0x64 | 0x65)).map(|(_, n)| n).sum()
    }
    pub fn count(&self, opcode: u8) -> u64 {
        self.opcodes.get(&opcode).copied().unwrap_or(0)
    }
}

/// Both directions of the link: `to_vm` is ours (source `our_ip`), `from_vm` the VM's.
#[derive(Clone, Debug, Default)]
pub struct UdWire {
    pub to_vm: UdDir,
    pub from_vm: UdDir,
}

/// Read the capture at `path` (the bridge's pcap).
pub fn scan_pcap(path: &Path, our_ip: IpAddr) -> Result<UdWire> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut r = pcap_file::pcap::PcapReader::new(f)?;
    let mut w = UdWire::default();
    while let Some(pkt) = r.next_packet() {
        let pkt = pkt?;
        let Ok(Frame::Roce(rf)) = parse_ethernet(&pkt.data) else {
            continue;
        };
        let d = if rf.ip.src() == our_ip { &mut w.to_vm } else { &mut w.from_vm };
        let b = &rf.packet.bth;
        d.frames += 1;
        *d.opcodes.entry(b.opcode).or_insert(0) += 1;
        d.ack_req += u64::from(b.ack_req);
        d.solicited += u64::from(b.se);
        d.dest_qpns.insert(b.dest_qpn);
        if let Some(x) = rf.packet.deth() {
            d.qkeys.insert(x.qkey);
            d.src_qps.insert(x.src_qp);
        }
        if let Some(last) = d.last_psn {
            if b.psn != testbench::model::psn_add(last, 1) {
                d.psn_breaks += 1;
            }
        }
        d.first_psn.get_or_insert(b.psn);
        d.last_psn = Some(b.psn);
        d.payload_lens.insert(rf.packet.payload.len());
        d.sports.insert(rf.udp.sport);
        let len = match &rf.ip {
            IpHeader::V4(h) => {
                d.ttls.insert(h.ttl);
                20
            }
            IpHeader::V6(h) => {
                d.ttls.insert(h.hop_limit);
                40
            }
        };
        let off = rf.eth.header_len();
        if let Some(hdr) = pkt.data.get(off..off + len) {
            if d.ip_headers.len() < MAX_KEPT {
                d.ip_headers.push(ud_grh_area(hdr));
            }
        }
    }
    Ok(w)
}

impl std::fmt::Display for UdDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ops: Vec<String> = self.opcodes.iter().map(|(o, n)| format!("0x{o:02x} x{n}")).collect();
        write!(
            f,
            "{} frames ({}), AckReq {}, SE {}, Q_Keys {:x?}, DETH src QPs {:x?}, dest QPNs {:x?}, first PSN {:x?}, PSN breaks {}, payloads {:?} B, TTL {:?}, UDP sports {:x?}",
            self.frames,
            ops.join(", "),
            self.ack_req,
            self.solicited,
            self.qkeys,
            self.src_qps,
            self.dest_qpns,
            self.first_psn,
            self.psn_breaks,
            self.payload_lens,
            self.ttls,
            self.sports
        )
    }
}

impl std::fmt::Display for UdRecvCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} UD receives checked, {} bad, src_qp {:x?}, GRH-area TTL {:?}",
            self.checked, self.bad, self.src_qps, self.ttls
        )?;
        for p in &self.problems {
            write!(f, "\n    {p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GRH area of a frame the model received: 20 zero bytes and the frame's IPv4 header; any change to
    /// it is found.
    #[test]
    fn grh_area_checks() {
        use testbench::wire::frame::{MacAddr, RoceFrame};
        use testbench::wire::headers::{Bth, Deth};
        use testbench::wire::{ExtHeader, RocePacket};
        let (vm4, us4) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let (vm, us) = (IpAddr::V4(vm4), IpAddr::V4(us4));
        let pkt = RocePacket::new(
            Bth::new(0x64, 0x11, 5),
            vec![ExtHeader::Deth(Deth { qkey: 0x1111_1111, resv: 0, src_qp: 0x12 })],
            vec![0x7b; 1002],
        );
        let bytes = RoceFrame::ipv4(MacAddr([2; 6]), MacAddr([4; 6]), vm4, us4, 0xC012, pkt.clone()).build().unwrap();
        let a = testbench::wire::frame::ud_grh_area(&bytes[14..34]);
        assert_eq!(grh_problems(&a, 1002, vm, us), Vec::<String>::new());
        assert_eq!(ud_send_ip_len(1002), 1056);
        assert_eq!(grh_problems(&a, 1000, vm, us).len(), 1, "total length");
        assert_eq!(grh_problems(&a, 1002, us, vm).len(), 1, "addresses");
        let mut b = a;
        b[25] ^= 0xAA; // the IP ID, under the checksum
        assert!(grh_problems(&b, 1002, vm, us).iter().any(|p| p.contains("checksum")));
        let mut c = a;
        c[7] = 1;
        assert!(grh_problems(&c, 1002, vm, us).iter().any(|p| p.contains("first 20 bytes")));

        let wc = WorkCompletion {
            wr_id: 1,
            status: WcStatus::Success,
            opcode: WcOpcode::Recv,
            byte_len: 1042,
            imm_data: 0,
            invalidated_rkey: 0,
            qp_num: 0x11,
            src_qp: 0x12,
            wc_flags: WcFlags(WcFlags::GRH),
        };
        let mut k = UdRecvCheck::default();
        k.check(&wc, &a, 1002, 0x12, vm, us);
        assert_eq!((k.checked, k.bad), (1, 0), "{k}");
        k.check(&WorkCompletion { src_qp: 0x13, byte_len: 1002, wc_flags: WcFlags(0), ..wc }, &a, 1002, 0x12, vm, us);
        assert_eq!(k.bad, 1);
        assert!(k.problems[0].contains("src_qp") && k.problems[0].contains("byte_len") && k.problems[0].contains("GRH"), "{k}");
        let h = ud_grh_area(&bytes[14..34]);
        assert!(k.compare_with_capture(&[h, h]).is_none());
        let mut h2 = h;
        h2[25] ^= 1;
        assert!(k.compare_with_capture(&[h, h2]).unwrap().contains("receive #2"));
        assert!(k.compare_with_capture(&[h]).is_some());

        // over IPv6 the GRH area is the frame's IPv6 header as it is
        let (vm6, us6) = (crate::rxe::LAB_VM_IP6, crate::rxe::LAB_OUR_IP6);
        let (vm, us) = (IpAddr::V6(vm6), IpAddr::V6(us6));
        let bytes = RoceFrame::ipv6(MacAddr([2; 6]), MacAddr([4; 6]), vm6, us6, 0xC012, pkt).build().unwrap();
        let a = ud_grh_area(&bytes[14..54]);
        assert_eq!(a[..], bytes[14..54]);
        assert_eq!(grh_problems(&a, 1002, vm, us), Vec::<String>::new());
        assert_eq!(grh_problems(&a, 1000, vm, us).len(), 1, "payload length");
        assert_eq!(grh_problems(&a, 1002, us, vm).len(), 1, "addresses");
        assert_eq!(grh_problems(&a, 1002, IpAddr::V4(vm4), us).len(), 1, "families");
        let mut b = a;
        b[6] = 6;
        assert!(grh_problems(&b, 1002, vm, us).iter().any(|p| p.contains("next header")));
        let mut k = UdRecvCheck::default();
        k.check(&wc, &a, 1002, 0x12, vm, us);
        assert_eq!((k.checked, k.bad, k.ttls.iter().copied().collect::<Vec<_>>()), (1, 0, vec![64]), "{k}");
        assert!(k.compare_with_capture(&[a]).is_none());
    }
}
