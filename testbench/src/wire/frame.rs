//! Whole Ethernet frames: RoCEv2 (Ethernet, optional 802.1Q tag, IPv4 or IPv6, UDP, transport packet, ICRC),
//! ARP, and a classifier for everything else.
//!
//! Sources: rxe `rxe_net.c` (`prepare4`/`prepare6`, `prepare_udp_hdr`, `prepare_ipv4_hdr`,
//! `prepare_ipv6_hdr`, `rxe_udp_encap_recv`), `rxe_icrc.c` (`rxe_icrc_hdr`, `rxe_icrc_check`,
//! `rxe_icrc_generate`), and `docs/rxe-rules.md` section 1.
//!
//! Framing rules this module implements:
//! * RoCE is framed by the IP and UDP lengths, never by the frame length. Bytes after the IP datagram are
//!   Ethernet padding (or an FCS) and are not covered by the ICRC.
//! * On build, frames shorter than [`ETH_MIN_FRAME_LEN`] (60 bytes, no FCS) are padded with zeros.
//! * On parse, the trailing bytes are remembered (only when they differ from that default padding) so that
//!   building the parsed frame gives back the original bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::error::{need, WireError};
use super::headers::{BTH_LEN, ICRC_LEN};
use super::packet::RocePacket;
use crate::crc::{crc32_update, icrc_seed_state};

/// Ethernet header length without VLAN tag.
pub const ETH_HEADER_LEN: usize = 14;
/// 802.1Q tag length.
pub const VLAN_TAG_LEN: usize = 4;
/// Minimum Ethernet frame length without FCS (`ETH_ZLEN`).
pub const ETH_MIN_FRAME_LEN: usize = 60;
/// Ethertype IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// Ethertype ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// Ethertype (TPID) of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// Ethertype IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// Ethertype of RoCE v1 (not spoken by rxe; listed so the decoder can name it).
pub const ETHERTYPE_ROCE_V1: u16 = 0x8915;
/// IPv4 header length (IHL 5, the only one RoCEv2 uses).
pub const IPV4_HEADER_LEN: usize = 20;
/// IPv6 header length.
pub const IPV6_HEADER_LEN: usize = 40;
/// UDP header length.
pub const UDP_HEADER_LEN: usize = 8;
/// IP protocol number of TCP.
pub const IP_PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IP_PROTO_UDP: u8 = 17;
/// IPv4 flags: don't fragment (the 3-bit flags field value; rxe always sets it).
pub const IPV4_FLAG_DF: u8 = 0b010;
/// IPv4 flags: more fragments.
pub const IPV4_FLAG_MF: u8 = 0b001;
/// RoCEv2 UDP destination port (`ROCE_V2_UDP_DPORT`).
pub const ROCE_V2_UDP_DPORT: u16 = 4791;
/// Lowest UDP source port rxe uses (`rxe_qp_init_req`, `rdma_flow_label_to_udp_sport`).
pub const ROCE_UDP_SPORT_BASE: u16 = 0xC000;
/// The pseudo-LRH the ICRC starts with (`rxe_icrc_hdr`).
pub const ICRC_PSEUDO_LRH: [u8; 8] = [0xFF; 8];
/// ARP: hardware type Ethernet.
pub const ARP_HTYPE_ETHERNET: u16 = 1;
/// ARP: request.
pub const ARP_OP_REQUEST: u16 = 1;
/// ARP: reply.
pub const ARP_OP_REPLY: u16 = 2;
/// ARP packet length for Ethernet/IPv4.
pub const ARP_LEN: usize = 28;

/// A MAC address (the verbs vocabulary's type, shared with the driver).
pub use rnic_driver::verbs::MacAddr;

/// An 802.1Q tag (TPID 0x8100).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Tag control information: PCP (3 bits), DEI (1 bit), VID (12 bits).
    pub tci: u16,
}

impl VlanTag {
    pub fn pcp(&self) -> u8 {
        (self.tci >> 13) as u8
    }
    pub fn dei(&self) -> bool {
        self.tci & 0x1000 != 0
    }
    pub fn vid(&self) -> u16 {
        self.tci & 0x0FFF
    }
}

/// Ethernet addressing and optional VLAN tag; the ethertype is implied by what follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Ethernet {
    pub dst: MacAddr,
    pub src: MacAddr,
    pub vlan: Option<VlanTag>,
}

impl Ethernet {
    /// Parse the Ethernet header; returns it, the (inner) ethertype and the header length.
    pub fn parse(b: &[u8]) -> Result<(Self, u16, usize), WireError> {
        need(b, ETH_HEADER_LEN, "Ethernet header")?;
        let mut dst = [0; 6];
        let mut src = [0; 6];
        dst.copy_from_slice(&b[0..6]);
        src.copy_from_slice(&b[6..12]);
        let mut ethertype = u16::from_be_bytes([b[12], b[13]]);
        let mut off = ETH_HEADER_LEN;
        let mut vlan = None;
        if ethertype == ETHERTYPE_VLAN {
            need(b, ETH_HEADER_LEN + VLAN_TAG_LEN, "802.1Q tag")?;
            vlan = Some(VlanTag {
                tci: u16::from_be_bytes([b[14], b[15]]),
            });
            ethertype = u16::from_be_bytes([b[16], b[17]]);
            off += VLAN_TAG_LEN;
        }
        Ok((
            Ethernet {
                dst: MacAddr(dst),
                src: MacAddr(src),
                vlan,
            },
            ethertype,
            off,
        ))
    }

    /// Append the header with the given ethertype.
    pub fn build(&self, ethertype: u16, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.dst.0);
        out.extend_from_slice(&self.src.0);
        if let Some(tag) = self.vlan {
            out.extend_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
            out.extend_from_slice(&tag.tci.to_be_bytes());
        }
        out.extend_from_slice(&ethertype.to_be_bytes());
    }

    /// Header length (14, or 18 with a VLAN tag).
    pub fn header_len(&self) -> usize {
        ETH_HEADER_LEN + if self.vlan.is_some() { VLAN_TAG_LEN } else { 0 }
    }
}

/// The Internet checksum (RFC 1071) of `data`.
pub fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// IP protocol number of ICMP.
pub const IP_PROTO_ICMP: u8 = 1;
/// ICMP echo request and reply types.
pub const ICMP_ECHO_REQUEST: u8 = 8;
pub const ICMP_ECHO_REPLY: u8 = 0;
/// The longest echo request (IP total length) the RNIC answers: a 9,000-byte jumbo MTU.
pub const ICMP_ECHO_MAX_IP_LEN: usize = 9000;
/// TTL of our echo replies (Linux's default).
pub const ICMP_REPLY_TTL: u8 = 64;

/// Ones-complement 16-bit addition (end-around carry).
pub fn ones_add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xFFFF) + (s >> 16)) as u16
}

/// The echo reply the RNIC sends for `frame`, or None when it sends none. The rules (the RTL's
/// `wire::icmp::IcmpEcho` follows them byte for byte):
/// - answered: an untagged IPv4 frame, header without options (0x45) and with a right header checksum,
///   to `my_ip`, not a fragment (MF and offset 0), protocol ICMP, type 8 (echo request), IP total length
///   28..=[`ICMP_ECHO_MAX_IP_LEN`] and all of it in the frame (Ethernet padding and trailers are not echoed);
/// - the reply: Ethernet to the requester's MAC from `my_mac`; IPv4 with TOS 0, the request's total length and
///   identification, no flags, TTL 64, from `my_ip` to the requester, a fresh header checksum; the ICMP
///   message echoed with type 0, its checksum updated from the request's (RFC 1624: the ICMP checksum is not
///   verified, a request with a bad one gets a reply with a bad one, which its sender drops); padded with
///   zeros to 60 bytes.
pub fn icmp_echo_reply(frame: &[u8], my_mac: MacAddr, my_ip: Ipv4Addr) -> Option<Vec<u8>> {
    let ip = ETH_HEADER_LEN;
    if frame.len() < ip + IPV4_HEADER_LEN + 8
        || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_IPV4
        || frame[ip] != 0x45
        || frame[ip + 16..ip + 20] != my_ip.octets()
        || u16::from_be_bytes([frame[ip + 6], frame[ip + 7]]) & 0x3FFF != 0
        || frame[ip + 9] != IP_PROTO_ICMP
        || frame[ip + IPV4_HEADER_LEN] != ICMP_ECHO_REQUEST
        || internet_checksum(&frame[ip..ip + IPV4_HEADER_LEN]) != 0
    {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([frame[ip + 2], frame[ip + 3]]));
    if !(IPV4_HEADER_LEN + 8..=ICMP_ECHO_MAX_IP_LEN).contains(&total) || ip + total > frame.len() {
        return None;
    }
    let mut out = Vec::with_capacity((ip + total).max(ETH_MIN_FRAME_LEN));
    out.extend_from_slice(&frame[6..12]);
    out.extend_from_slice(&my_mac.0);
    out.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    out.extend_from_slice(&[0x45, 0]);
    out.extend_from_slice(&frame[ip + 2..ip + 6]); // total length, identification
    out.extend_from_slice(&[0, 0, ICMP_REPLY_TTL, IP_PROTO_ICMP, 0, 0]);
    out.extend_from_slice(&my_ip.octets());
    out.extend_from_slice(&frame[ip + 12..ip + 16]);
    let sum = internet_checksum(&out[ip..ip + IPV4_HEADER_LEN]);
    out[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
    let icmp = ip + IPV4_HEADER_LEN;
    out.extend_from_slice(&frame[icmp..ip + total]);
    out[icmp] = ICMP_ECHO_REPLY;
    // type 8 -> 0: HC' = ~(~HC + ~0x0800 + 0x0000) (RFC 1624, eqn. 3)
    let hc = u16::from_be_bytes([out[icmp + 2], out[icmp + 3]]);
    let hc2 = !ones_add(!hc, !(u16::from(ICMP_ECHO_REQUEST) << 8));
    out[icmp + 2..icmp + 4].copy_from_slice(&hc2.to_be_bytes());
    if out.len() < ETH_MIN_FRAME_LEN {
        out.resize(ETH_MIN_FRAME_LEN, 0);
    }
    Some(out)
}

/// An echo request from (`mac`, `ip`) to `dst` with identifier, sequence number and payload, every checksum
/// right, unpadded.
pub fn icmp_echo_request(mac: MacAddr, ip: Ipv4Addr, dst_mac: MacAddr, dst: Ipv4Addr, id: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
    let total = IPV4_HEADER_LEN + 8 + payload.len();
    let mut f = Vec::with_capacity(ETH_HEADER_LEN + total);
    f.extend_from_slice(&dst_mac.0);
    f.extend_from_slice(&mac.0);
    f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&(total as u16).to_be_bytes());
    f.extend_from_slice(&seq.wrapping_mul(31).to_be_bytes());
    f.extend_from_slice(&[0x40, 0, 64, IP_PROTO_ICMP, 0, 0]);
    f.extend_from_slice(&ip.octets());
    f.extend_from_slice(&dst.octets());
    let sum = internet_checksum(&f[ETH_HEADER_LEN..]);
    f[ETH_HEADER_LEN + 10..ETH_HEADER_LEN + 12].copy_from_slice(&sum.to_be_bytes());
    let icmp = f.len();
    f.extend_from_slice(&[ICMP_ECHO_REQUEST, 0, 0, 0]);
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(payload);
    let sum = internet_checksum(&f[icmp..]);
    f[icmp + 2..icmp + 4].copy_from_slice(&sum.to_be_bytes());
    f
}

/// IPv4 header of a RoCEv2 packet (rxe `prepare_ipv4_hdr`). Version 4, IHL 5 and protocol 17 are fixed;
/// total length and header checksum are computed on build and checked on parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Header {
    /// DSCP and ECN (rxe: the address vector's traffic class).
    pub tos: u8,
    pub id: u16,
    /// The 3 flag bits (reserved, DF, MF); rxe sends [`IPV4_FLAG_DF`].
    pub flags: u8,
    /// Fragment offset, 13 bits.
    pub frag_offset: u16,
    pub ttl: u8,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
}

impl Ipv4Header {
    /// Header as rxe sends it (DF, TTL 64, TOS 0, ID 0).
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        Ipv4Header {
            tos: 0,
            id: 0,
            flags: IPV4_FLAG_DF,
            frag_offset: 0,
            ttl: 64,
            src,
            dst,
        }
    }

    /// The 20 header bytes with `total_len` and the computed checksum.
    pub fn build(&self, total_len: u16, out: &mut Vec<u8>) {
        let start = out.len();
        out.push(0x45);
        out.push(self.tos);
        out.extend_from_slice(&total_len.to_be_bytes());
        out.extend_from_slice(&self.id.to_be_bytes());
        let ff = u16::from(self.flags & 7) << 13 | self.frag_offset & 0x1FFF;
        out.extend_from_slice(&ff.to_be_bytes());
        out.push(self.ttl);
        out.push(IP_PROTO_UDP);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.src.octets());
        out.extend_from_slice(&self.dst.octets());
        let sum = internet_checksum(&out[start..]);
        out[start + 10..start + 12].copy_from_slice(&sum.to_be_bytes());
    }
}

/// IPv6 header of a RoCEv2 packet (rxe `prepare_ipv6_hdr`). Next header 17 is fixed (no extension headers);
/// the payload length is computed on build and checked on parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6Header {
    pub traffic_class: u8,
    /// Flow label, 20 bits (rxe always sends 0).
    pub flow_label: u32,
    pub hop_limit: u8,
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
}

impl Ipv6Header {
    /// Header as rxe sends it (TC 0, flow label 0, hop limit 64).
    pub fn new(src: Ipv6Addr, dst: Ipv6Addr) -> Self {
        Ipv6Header {
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
            src,
            dst,
        }
    }

    /// The header bytes for a payload (UDP datagram) of `payload_len` bytes.
    pub fn build(&self, payload_len: u16, out: &mut Vec<u8>) {
        let w = 6u32 << 28 | u32::from(self.traffic_class) << 20 | self.flow_label & 0xF_FFFF;
        out.extend_from_slice(&w.to_be_bytes());
        out.extend_from_slice(&payload_len.to_be_bytes());
        out.push(IP_PROTO_UDP);
        out.push(self.hop_limit);
        out.extend_from_slice(&self.src.octets());
        out.extend_from_slice(&self.dst.octets());
    }
}

/// IPv4 or IPv6.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpHeader {
    V4(Ipv4Header),
    V6(Ipv6Header),
}

impl IpHeader {
    pub fn src(&self) -> IpAddr {
        match self {
            IpHeader::V4(h) => h.src.into(),
            IpHeader::V6(h) => h.src.into(),
        }
    }
    pub fn dst(&self) -> IpAddr {
        match self {
            IpHeader::V4(h) => h.dst.into(),
            IpHeader::V6(h) => h.dst.into(),
        }
    }
    pub fn header_len(&self) -> usize {
        match self {
            IpHeader::V4(_) => IPV4_HEADER_LEN,
            IpHeader::V6(_) => IPV6_HEADER_LEN,
        }
    }
    pub fn ethertype(&self) -> u16 {
        match self {
            IpHeader::V4(_) => ETHERTYPE_IPV4,
            IpHeader::V6(_) => ETHERTYPE_IPV6,
        }
    }
}

/// UDP header; the length is computed on build and checked on parse, the checksum is kept as given (rxe sends
/// 0 and ignores it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdpHeader {
    pub sport: u16,
    pub dport: u16,
    pub checksum: u16,
}

impl UdpHeader {
    /// RoCEv2 UDP header with checksum 0, as rxe sends it.
    pub fn roce(sport: u16) -> Self {
        UdpHeader {
            sport,
            dport: ROCE_V2_UDP_DPORT,
            checksum: 0,
        }
    }
}

/// Bytes of the GRH area rxe writes in front of a UD payload in the receive buffer.
pub const UD_GRH_LEN: usize = 40;

/// The GRH area of a UD datagram that came with IP header `ip` (rxe `rxe_resp.c` `send_data_in`, RoCEv2): an
/// IPv4 header (20 bytes) after 20 zero bytes, an IPv6 header (40 bytes) as it is. Bytes `ip` lacks are 0.
pub fn ud_grh_area(ip: &[u8]) -> [u8; UD_GRH_LEN] {
    let mut a = [0u8; UD_GRH_LEN];
    let at = if ip.len() <= IPV4_HEADER_LEN { UD_GRH_LEN - IPV4_HEADER_LEN } else { 0 };
    let n = ip.len().min(UD_GRH_LEN - at);
    a[at..at + n].copy_from_slice(&ip[..n]);
    a
}

/// The ICRC of a RoCEv2 datagram, as rxe computes it (`rxe_icrc_hdr`, `rxe_icrc_generate`).
///
/// `datagram` runs from the first byte of the IP header to the last pad byte (the ICRC itself excluded). The
/// CRC-32 covers the 8-byte all-ones pseudo-LRH, then the IP header with (IPv4) TOS, TTL and checksum or (IPv6)
/// traffic class, flow label and hop limit set to all ones, the UDP header with checksum 0xFFFF, the BTH with
/// byte 4 (FECN, BECN, reserved) 0xFF, and the rest unchanged. The IP version nibble selects the masks. The
/// result goes on the wire least-significant byte first (`to_le_bytes`). IPv4 headers are assumed to have IHL 5,
/// the only form RoCEv2 uses.
pub fn icrc(datagram: &[u8]) -> u32 {
    let v6 = datagram.first().map_or(false, |b| b >> 4 == 6);
    let mask = icrc_header_mask(v6);
    let masked_len = mask.len().min(datagram.len());
    let hdr: Vec<u8> = datagram[..masked_len].iter().zip(&mask).map(|(b, m)| b | m).collect();
    let state = crc32_update(icrc_seed_state(), &hdr);
    !crc32_update(state, &datagram[masked_len..])
}

/// The bits the ICRC forces to one, over the IP, UDP and BTH headers (a byte mask OR-ed onto them): IPv4 TOS,
/// TTL and header checksum, or IPv6 traffic class, flow label and hop limit; the UDP checksum; BTH byte 4
/// (FECN, BECN, reserved). The RTL ICRC engine takes its masks from here.
pub fn icrc_header_mask(ipv6: bool) -> Vec<u8> {
    let ip_len = if ipv6 { IPV6_HEADER_LEN } else { IPV4_HEADER_LEN };
    let mut m = vec![0u8; ip_len + UDP_HEADER_LEN + BTH_LEN];
    if ipv6 {
        m[0] = 0x0F;
        for i in [1, 2, 3, 7] {
            m[i] = 0xFF;
        }
    } else {
        for i in [1, 8, 10, 11] {
            m[i] = 0xFF;
        }
    }
    m[ip_len + 6] = 0xFF;
    m[ip_len + 7] = 0xFF;
    m[ip_len + UDP_HEADER_LEN + 4] = 0xFF;
    m
}

/// Result of an ICRC check on raw frame bytes: the ICRC found on the wire and the one computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IcrcCheck {
    pub wire: u32,
    pub computed: u32,
}

impl IcrcCheck {
    pub fn ok(&self) -> bool {
        self.wire == self.computed
    }
}

/// Check the ICRC of raw frame bytes, framing the datagram only by the Ethernet header and the IP and UDP
/// length fields, exactly as a receiver does (rxe `rxe_udp_encap_recv` / `rxe_icrc_check`); nothing behind the
/// UDP header is interpreted. Errors only when the framing itself is broken.
pub fn check_icrc(frame: &[u8]) -> Result<IcrcCheck, WireError> {
    let (_, ethertype, off) = Ethernet::parse(frame)?;
    let l3 = &frame[off..];
    let (ip_hdr, total) = match ethertype {
        ETHERTYPE_IPV4 => {
            need(l3, IPV4_HEADER_LEN, "IPv4 header")?;
            if l3[0] != 0x45 {
                return Err(if l3[0] >> 4 != 4 {
                    WireError::BadIpVersion(l3[0] >> 4)
                } else {
                    WireError::Ipv4Options(l3[0] & 0x0F)
                });
            }
            (IPV4_HEADER_LEN, u16::from_be_bytes([l3[2], l3[3]]) as usize)
        }
        ETHERTYPE_IPV6 => {
            need(l3, IPV6_HEADER_LEN, "IPv6 header")?;
            if l3[0] >> 4 != 6 {
                return Err(WireError::BadIpVersion(l3[0] >> 4));
            }
            (
                IPV6_HEADER_LEN,
                IPV6_HEADER_LEN + u16::from_be_bytes([l3[4], l3[5]]) as usize,
            )
        }
        _ => return Err(WireError::NotRoce("ethertype is neither IPv4 nor IPv6")),
    };
    need(l3, total, "IP datagram")?;
    let udp = l3.get(ip_hdr..total).unwrap_or(&[]);
    need(udp, UDP_HEADER_LEN, "UDP header")?;
    let udp_len = u16::from_be_bytes([udp[4], udp[5]]) as usize;
    if udp_len != udp.len() {
        return Err(WireError::BadLength {
            what: "UDP length",
            got: udp_len,
            want: udp.len(),
        });
    }
    need(udp, UDP_HEADER_LEN + BTH_LEN + ICRC_LEN, "BTH and ICRC")?;
    let w = &l3[total - ICRC_LEN..total];
    Ok(IcrcCheck {
        wire: u32::from_le_bytes([w[0], w[1], w[2], w[3]]),
        computed: icrc(&l3[..total - ICRC_LEN]),
    })
}

/// Default Ethernet padding for a frame of `len` bytes: zeros up to [`ETH_MIN_FRAME_LEN`].
fn default_trailer_len(len: usize) -> usize {
    ETH_MIN_FRAME_LEN.saturating_sub(len)
}

fn finish_trailer(out: &mut Vec<u8>, trailer: &Option<Vec<u8>>) {
    match trailer {
        Some(t) => out.extend_from_slice(t),
        None => out.resize(out.len() + default_trailer_len(out.len()), 0),
    }
}

fn remember_trailer(frame_len_without: usize, trailer: &[u8]) -> Option<Vec<u8>> {
    let default = trailer.len() == default_trailer_len(frame_len_without) && trailer.iter().all(|&b| b == 0);
    (!default).then(|| trailer.to_vec())
}

/// A complete RoCEv2 frame.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RoceFrame {
    pub eth: Ethernet,
    pub ip: IpHeader,
    pub udp: UdpHeader,
    pub packet: RocePacket,
    /// `None`: the ICRC is the correct one (computed on build). `Some(v)`: the wire carries `v` instead; parse
    /// sets this only when the received ICRC is wrong, so that build reproduces a bad frame exactly.
    pub icrc_override: Option<u32>,
    /// `None`: default Ethernet padding (zeros to 60 bytes). `Some(bytes)`: exactly these bytes follow the IP
    /// datagram (parse sets this only when the received trailer differs from the default).
    pub eth_trailer: Option<Vec<u8>>,
}

impl RoceFrame {
    /// An IPv4 RoCEv2 frame with rxe's defaults (DF, TTL 64, UDP checksum 0, no VLAN).
    pub fn ipv4(
        src_mac: MacAddr,
        dst_mac: MacAddr,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        sport: u16,
        packet: RocePacket,
    ) -> Self {
        RoceFrame {
            eth: Ethernet {
                dst: dst_mac,
                src: src_mac,
                vlan: None,
            },
            ip: IpHeader::V4(Ipv4Header::new(src, dst)),
            udp: UdpHeader::roce(sport),
            packet,
            icrc_override: None,
            eth_trailer: None,
        }
    }

    /// An IPv6 RoCEv2 frame with rxe's defaults (TC 0, flow label 0, hop limit 64, UDP checksum 0, no VLAN).
    pub fn ipv6(
        src_mac: MacAddr,
        dst_mac: MacAddr,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        sport: u16,
        packet: RocePacket,
    ) -> Self {
        RoceFrame {
            eth: Ethernet {
                dst: dst_mac,
                src: src_mac,
                vlan: None,
            },
            ip: IpHeader::V6(Ipv6Header::new(src, dst)),
            udp: UdpHeader::roce(sport),
            packet,
            icrc_override: None,
            eth_trailer: None,
        }
    }

    /// Build the frame bytes (no FCS).
    pub fn build(&self) -> Result<Vec<u8>, WireError> {
        let mut out = Vec::with_capacity(self.eth.header_len() + 60 + self.packet.wire_len());
        self.build_into(&mut out)?;
        Ok(out)
    }

    /// Append the frame bytes (no FCS) to `out`.
    pub fn build_into(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        let mut body = Vec::with_capacity(self.packet.wire_len());
        self.packet.build(&mut body)?;
        let udp_len = UDP_HEADER_LEN + body.len() + ICRC_LEN;
        let ip_total = self.ip.header_len() + udp_len;
        let too_long = match self.ip {
            IpHeader::V4(_) => ip_total > 0xFFFF,
            IpHeader::V6(_) => udp_len > 0xFFFF,
        };
        if too_long {
            return Err(WireError::TooLong(ip_total));
        }
        let frame_start = out.len();
        self.eth.build(self.ip.ethertype(), out);
        let ip_start = out.len();
        match &self.ip {
            IpHeader::V4(h) => h.build(ip_total as u16, out),
            IpHeader::V6(h) => h.build(udp_len as u16, out),
        }
        out.extend_from_slice(&self.udp.sport.to_be_bytes());
        out.extend_from_slice(&self.udp.dport.to_be_bytes());
        out.extend_from_slice(&(udp_len as u16).to_be_bytes());
        out.extend_from_slice(&self.udp.checksum.to_be_bytes());
        out.extend_from_slice(&body);
        let crc = self.icrc_override.unwrap_or_else(|| icrc(&out[ip_start..]));
        out.extend_from_slice(&crc.to_le_bytes());
        match &self.eth_trailer {
            Some(t) => out.extend_from_slice(t),
            None => {
                let len = out.len() - frame_start;
                out.resize(out.len() + default_trailer_len(len), 0);
            }
        }
        Ok(())
    }

    /// The correct ICRC for this frame's contents.
    pub fn compute_icrc(&self) -> Result<u32, WireError> {
        let mut copy = self.clone();
        copy.icrc_override = None;
        copy.eth_trailer = Some(Vec::new());
        let bytes = copy.build()?;
        let ip_start = self.eth.header_len();
        Ok(icrc(&bytes[ip_start..bytes.len() - ICRC_LEN]))
    }

    /// The ICRC carried on the wire (the override, or the computed one).
    pub fn wire_icrc(&self) -> Result<u32, WireError> {
        match self.icrc_override {
            Some(v) => Ok(v),
            None => self.compute_icrc(),
        }
    }

    /// True when the wire ICRC is the correct one.
    pub fn icrc_ok(&self) -> bool {
        match self.icrc_override {
            None => true,
            Some(v) => self.compute_icrc().map_or(false, |c| c == v),
        }
    }

    /// `Err(BadIcrc)` unless the wire ICRC is correct.
    pub fn verify_icrc(&self) -> Result<(), WireError> {
        let want = self.compute_icrc()?;
        match self.icrc_override {
            Some(got) if got != want => Err(WireError::BadIcrc { got, want }),
            _ => Ok(()),
        }
    }

    /// Parse a RoCEv2 frame (no FCS; any trailing bytes past the IP datagram are kept as the Ethernet trailer).
    /// A bad ICRC is not an error here: it shows in [`RoceFrame::icrc_ok`] / [`RoceFrame::icrc_override`].
    pub fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let (eth, ethertype, ip_off) = Ethernet::parse(bytes)?;
        let rest = &bytes[ip_off..];
        let (ip, ip_hdr_len, ip_len) = match ethertype {
            ETHERTYPE_IPV4 => parse_ipv4(rest)?,
            ETHERTYPE_IPV6 => parse_ipv6(rest)?,
            _ => return Err(WireError::NotRoce("ethertype is neither IPv4 nor IPv6")),
        };
        let datagram = &rest[..ip_len];
        let udp_bytes = &datagram[ip_hdr_len..];
        need(udp_bytes, UDP_HEADER_LEN, "UDP header")?;
        let udp = UdpHeader {
            sport: u16::from_be_bytes([udp_bytes[0], udp_bytes[1]]),
            dport: u16::from_be_bytes([udp_bytes[2], udp_bytes[3]]),
            checksum: u16::from_be_bytes([udp_bytes[6], udp_bytes[7]]),
        };
        let udp_len = u16::from_be_bytes([udp_bytes[4], udp_bytes[5]]) as usize;
        if udp.dport != ROCE_V2_UDP_DPORT {
            return Err(WireError::NotRoce("UDP destination port is not 4791"));
        }
        if udp_len != udp_bytes.len() {
            return Err(WireError::BadLength {
                what: "UDP length",
                got: udp_len,
                want: udp_bytes.len(),
            });
        }
        let roce = &udp_bytes[UDP_HEADER_LEN..];
        need(roce, BTH_LEN + ICRC_LEN, "BTH and ICRC")?;
        let (body, icrc_bytes) = roce.split_at(roce.len() - ICRC_LEN);
        let packet = RocePacket::parse(body)?;
        let wire = u32::from_le_bytes([icrc_bytes[0], icrc_bytes[1], icrc_bytes[2], icrc_bytes[3]]);
        let want = icrc(&datagram[..datagram.len() - ICRC_LEN]);
        let end = ip_off + ip_len;
        Ok(RoceFrame {
            eth,
            ip,
            udp,
            packet,
            icrc_override: (wire != want).then_some(wire),
            eth_trailer: remember_trailer(end, &bytes[end..]),
        })
    }
}

/// Parse a RoCEv2 IPv4 header; returns it, its length and the datagram length (IP total length).
fn parse_ipv4(b: &[u8]) -> Result<(IpHeader, usize, usize), WireError> {
    need(b, IPV4_HEADER_LEN, "IPv4 header")?;
    if b[0] >> 4 != 4 {
        return Err(WireError::BadIpVersion(b[0] >> 4));
    }
    let ihl = b[0] & 0x0F;
    if ihl != 5 {
        return Err(WireError::Ipv4Options(ihl));
    }
    if b[9] != IP_PROTO_UDP {
        return Err(WireError::NotRoce("IP protocol is not UDP"));
    }
    let total = u16::from_be_bytes([b[2], b[3]]) as usize;
    if total < IPV4_HEADER_LEN {
        return Err(WireError::BadLength {
            what: "IPv4 total length",
            got: total,
            want: IPV4_HEADER_LEN,
        });
    }
    need(b, total, "IPv4 datagram")?;
    let ff = u16::from_be_bytes([b[6], b[7]]);
    let (flags, frag_offset) = ((ff >> 13) as u8, ff & 0x1FFF);
    if flags & IPV4_FLAG_MF != 0 || frag_offset != 0 {
        return Err(WireError::Fragmented {
            flags,
            offset: frag_offset,
        });
    }
    let got = u16::from_be_bytes([b[10], b[11]]);
    let mut hdr = [0u8; IPV4_HEADER_LEN];
    hdr.copy_from_slice(&b[..IPV4_HEADER_LEN]);
    hdr[10] = 0;
    hdr[11] = 0;
    let want = internet_checksum(&hdr);
    if got != want {
        return Err(WireError::BadIpChecksum { got, want });
    }
    let h = Ipv4Header {
        tos: b[1],
        id: u16::from_be_bytes([b[4], b[5]]),
        flags,
        frag_offset,
        ttl: b[8],
        src: Ipv4Addr::new(b[12], b[13], b[14], b[15]),
        dst: Ipv4Addr::new(b[16], b[17], b[18], b[19]),
    };
    Ok((IpHeader::V4(h), IPV4_HEADER_LEN, total))
}

fn ipv6_addr(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    Ipv6Addr::from(a)
}

/// Parse a RoCEv2 IPv6 header; returns it, its length and the datagram length (40 + payload length).
fn parse_ipv6(b: &[u8]) -> Result<(IpHeader, usize, usize), WireError> {
    need(b, IPV6_HEADER_LEN, "IPv6 header")?;
    if b[0] >> 4 != 6 {
        return Err(WireError::BadIpVersion(b[0] >> 4));
    }
    if b[6] != IP_PROTO_UDP {
        return Err(WireError::NotRoce("IPv6 next header is not UDP"));
    }
    let w = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let total = IPV6_HEADER_LEN + u16::from_be_bytes([b[4], b[5]]) as usize;
    need(b, total, "IPv6 datagram")?;
    let h = Ipv6Header {
        traffic_class: (w >> 20) as u8,
        flow_label: w & 0xF_FFFF,
        hop_limit: b[7],
        src: ipv6_addr(&b[8..]),
        dst: ipv6_addr(&b[24..]),
    };
    Ok((IpHeader::V6(h), IPV6_HEADER_LEN, total))
}

/// An Ethernet/IPv4 ARP packet (RFC 826).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArpPacket {
    /// [`ARP_OP_REQUEST`] or [`ARP_OP_REPLY`] (other values are kept).
    pub oper: u16,
    pub sha: MacAddr,
    pub spa: Ipv4Addr,
    pub tha: MacAddr,
    pub tpa: Ipv4Addr,
}

impl ArpPacket {
    /// The reply a host with MAC `mac` sends to this request (sender and target swapped).
    pub fn reply_from(&self, mac: MacAddr) -> ArpPacket {
        ArpPacket {
            oper: ARP_OP_REPLY,
            sha: mac,
            spa: self.tpa,
            tha: self.sha,
            tpa: self.spa,
        }
    }

    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        need(b, 8, "ARP header")?;
        let htype = u16::from_be_bytes([b[0], b[1]]);
        let ptype = u16::from_be_bytes([b[2], b[3]]);
        let (hlen, plen) = (b[4], b[5]);
        if htype != ARP_HTYPE_ETHERNET || ptype != ETHERTYPE_IPV4 || hlen != 6 || plen != 4 {
            return Err(WireError::UnsupportedArp {
                htype,
                ptype,
                hlen,
                plen,
            });
        }
        need(b, ARP_LEN, "ARP packet")?;
        let mac = |o: usize| {
            let mut m = [0; 6];
            m.copy_from_slice(&b[o..o + 6]);
            MacAddr(m)
        };
        let ip = |o: usize| Ipv4Addr::new(b[o], b[o + 1], b[o + 2], b[o + 3]);
        Ok(ArpPacket {
            oper: u16::from_be_bytes([b[6], b[7]]),
            sha: mac(8),
            spa: ip(14),
            tha: mac(18),
            tpa: ip(24),
        })
    }

    pub fn build(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&ARP_HTYPE_ETHERNET.to_be_bytes());
        out.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        out.extend_from_slice(&[6, 4]);
        out.extend_from_slice(&self.oper.to_be_bytes());
        out.extend_from_slice(&self.sha.0);
        out.extend_from_slice(&self.spa.octets());
        out.extend_from_slice(&self.tha.0);
        out.extend_from_slice(&self.tpa.octets());
    }
}

/// An ARP frame.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArpFrame {
    pub eth: Ethernet,
    pub arp: ArpPacket,
    /// As [`RoceFrame::eth_trailer`]: `None` = zero padding to 60 bytes.
    pub eth_trailer: Option<Vec<u8>>,
}

impl ArpFrame {
    /// A broadcast "who-has `target_ip`" request.
    pub fn request(src_mac: MacAddr, src_ip: Ipv4Addr, target_ip: Ipv4Addr) -> Self {
        ArpFrame {
            eth: Ethernet {
                dst: MacAddr::BROADCAST,
                src: src_mac,
                vlan: None,
            },
            arp: ArpPacket {
                oper: ARP_OP_REQUEST,
                sha: src_mac,
                spa: src_ip,
                tha: MacAddr::ZERO,
                tpa: target_ip,
            },
            eth_trailer: None,
        }
    }

    /// The unicast reply of the host with `mac` to this frame's request.
    pub fn reply_from(&self, mac: MacAddr) -> Self {
        ArpFrame {
            eth: Ethernet {
                dst: self.arp.sha,
                src: mac,
                vlan: self.eth.vlan,
            },
            arp: self.arp.reply_from(mac),
            eth_trailer: None,
        }
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let (eth, ethertype, off) = Ethernet::parse(bytes)?;
        if ethertype != ETHERTYPE_ARP {
            return Err(WireError::WrongEthertype {
                got: ethertype,
                want: ETHERTYPE_ARP,
            });
        }
        let arp = ArpPacket::parse(&bytes[off..])?;
        let end = off + ARP_LEN;
        Ok(ArpFrame {
            eth,
            arp,
            eth_trailer: remember_trailer(end, &bytes[end..]),
        })
    }

    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ETH_MIN_FRAME_LEN);
        self.eth.build(ETHERTYPE_ARP, &mut out);
        self.arp.build(&mut out);
        finish_trailer(&mut out, &self.eth_trailer);
        out
    }
}

/// Addresses of a non-RoCE IP packet, for display.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpSummary {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IPv4 protocol / IPv6 next header.
    pub protocol: u8,
    /// TCP/UDP source and destination port, when the header is there (first fragment, no IPv6 ext headers).
    pub ports: Option<(u16, u16)>,
}

/// A frame that is neither RoCEv2 nor ARP, kept whole.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OtherFrame {
    pub eth: Ethernet,
    pub ethertype: u16,
    pub ip: Option<IpSummary>,
    pub bytes: Vec<u8>,
}

/// Any Ethernet frame.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Frame {
    Roce(RoceFrame),
    Arp(ArpFrame),
    Other(OtherFrame),
}

impl Frame {
    /// Build the frame bytes.
    pub fn build(&self) -> Result<Vec<u8>, WireError> {
        match self {
            Frame::Roce(f) => f.build(),
            Frame::Arp(f) => Ok(f.build()),
            Frame::Other(f) => Ok(f.bytes.clone()),
        }
    }
}

/// What a port on 802.1Q VLAN `vid` (or on none) takes of a frame, as Linux's `eth0.VID` (or `eth0`) does
/// and as the RNIC's VLAN Strip does: the frame without its tag, or `None` when it is not the port's (another
/// VID, or untagged while the port is on a VLAN). Off a VLAN an untagged frame is taken as it is and a
/// priority-tagged one (VID 0) loses its tag. A frame counts as tagged when it holds the whole tag (16 bytes)
/// and its ethertype is [`ETHERTYPE_VLAN`]; one tag is looked at.
pub fn port_vlan_view(f: &[u8], vid: Option<u16>) -> Option<Vec<u8>> {
    let tagged = f.len() >= ETH_HEADER_LEN + 2 && f[12..14] == ETHERTYPE_VLAN.to_be_bytes();
    if !tagged {
        return vid.is_none().then(|| f.to_vec());
    }
    let tag_vid = u16::from_be_bytes([f[14], f[15]]) & 0x0FFF;
    (tag_vid == vid.unwrap_or(0)).then(|| [&f[..12], &f[12 + VLAN_TAG_LEN..]].concat())
}

/// Classify and parse an Ethernet frame (no FCS). UDP to port 4791 over IPv4 or IPv6 is RoCEv2 and must parse
/// as such (its errors are returned); Ethernet/IPv4 ARP is [`Frame::Arp`]; everything else is
/// [`Frame::Other`]. Errors: a truncated Ethernet header, an IP datagram shorter than its IP length field, a
/// malformed RoCEv2 packet, a truncated ARP.
pub fn parse_ethernet(bytes: &[u8]) -> Result<Frame, WireError> {
    let (eth, ethertype, off) = Ethernet::parse(bytes)?;
    let l3 = &bytes[off..];
    let other = |ip| {
        Ok(Frame::Other(OtherFrame {
            eth,
            ethertype,
            ip,
            bytes: bytes.to_vec(),
        }))
    };
    let ports =
        |l4: &[u8]| (l4.len() >= 4).then(|| (u16::from_be_bytes([l4[0], l4[1]]), u16::from_be_bytes([l4[2], l4[3]])));
    match ethertype {
        ETHERTYPE_ARP => match ArpFrame::parse(bytes) {
            Ok(f) => Ok(Frame::Arp(f)),
            Err(WireError::UnsupportedArp { .. }) => other(None),
            Err(e) => Err(e),
        },
        ETHERTYPE_IPV4 => {
            need(l3, IPV4_HEADER_LEN, "IPv4 header")?;
            if l3[0] >> 4 != 4 {
                return Err(WireError::BadIpVersion(l3[0] >> 4));
            }
            let total = u16::from_be_bytes([l3[2], l3[3]]) as usize;
            need(l3, total, "IPv4 datagram")?;
            let ihl = (l3[0] & 0x0F) as usize * 4;
            let first_fragment = u16::from_be_bytes([l3[6], l3[7]]) & 0x1FFF == 0;
            let protocol = l3[9];
            let p = if first_fragment && ihl >= IPV4_HEADER_LEN {
                l3.get(ihl..).and_then(ports)
            } else {
                None
            };
            if protocol == IP_PROTO_UDP && p.map_or(false, |(_, d)| d == ROCE_V2_UDP_DPORT) {
                return RoceFrame::parse(bytes).map(Frame::Roce);
            }
            let src = Ipv4Addr::new(l3[12], l3[13], l3[14], l3[15]).into();
            let dst = Ipv4Addr::new(l3[16], l3[17], l3[18], l3[19]).into();
            let ports = if matches!(protocol, IP_PROTO_TCP | IP_PROTO_UDP) {
                p
            } else {
                None
            };
            other(Some(IpSummary {
                src,
                dst,
                protocol,
                ports,
            }))
        }
        ETHERTYPE_IPV6 => {
            need(l3, IPV6_HEADER_LEN, "IPv6 header")?;
            if l3[0] >> 4 != 6 {
                return Err(WireError::BadIpVersion(l3[0] >> 4));
            }
            need(
                l3,
                IPV6_HEADER_LEN + u16::from_be_bytes([l3[4], l3[5]]) as usize,
                "IPv6 datagram",
            )?;
            let protocol = l3[6];
            let p = if matches!(protocol, IP_PROTO_TCP | IP_PROTO_UDP) {
                ports(&l3[IPV6_HEADER_LEN..])
            } else {
                None
            };
            if protocol == IP_PROTO_UDP && p.map_or(false, |(_, d)| d == ROCE_V2_UDP_DPORT) {
                return RoceFrame::parse(bytes).map(Frame::Roce);
            }
            let (src, dst) = (ipv6_addr(&l3[8..]).into(), ipv6_addr(&l3[24..]).into());
            other(Some(IpSummary {
                src,
                dst,
                protocol,
                ports: p,
            }))
        }
        _ => other(None),
    }
}

#[cfg(test)]
mod icmp_tests {
    use super::*;

    /// For requests with right checksums the reply's ICMP checksum (updated, RFC 1624) is the one computed
    /// afresh, both checksums of the reply verify, and the reply's ICMP message is the request's with type 0.
    #[test]
    fn echo_replies_carry_checksums_as_if_computed_afresh() {
        let (me, my_ip) = (MacAddr([2, 0, 0, 0, 0, 2]), Ipv4Addr::new(10, 0, 0, 2));
        let peer = MacAddr([0x52, 0x54, 0, 0, 0, 1]);
        let mut x = 0x1234_5678u32;
        for n in 0..3000usize {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let payload: Vec<u8> = (0..n % 1500).map(|i| (x >> (i % 24)) as u8 ^ i as u8).collect();
            let req = icmp_echo_request(peer, Ipv4Addr::from(x | 1), me, my_ip, x as u16, (x >> 16) as u16, &payload);
            let r = icmp_echo_reply(&req, me, my_ip).expect("answered");
            let icmp = ETH_HEADER_LEN + IPV4_HEADER_LEN;
            assert_eq!(internet_checksum(&r[ETH_HEADER_LEN..icmp]), 0);
            let end = ETH_HEADER_LEN + IPV4_HEADER_LEN + 8 + payload.len();
            assert_eq!(internet_checksum(&r[icmp..end]), 0, "request {n}");
            let mut fresh = r[icmp..end].to_vec();
            fresh[2] = 0;
            fresh[3] = 0;
            assert_eq!(internet_checksum(&fresh).to_be_bytes(), [r[icmp + 2], r[icmp + 3]], "request {n}");
            assert_eq!(r[icmp], ICMP_ECHO_REPLY);
            assert_eq!(r[icmp + 4..end], req[icmp + 4..end]);
            assert!(r.len() >= ETH_MIN_FRAME_LEN);
        }
        // not answered: a bad header checksum, options, a fragment, another address, cut short
        let req = icmp_echo_request(peer, Ipv4Addr::new(10, 0, 0, 1), me, my_ip, 1, 1, &[7; 56]);
        for (at, v) in [(ETH_HEADER_LEN + 10, 0x55u8), (ETH_HEADER_LEN, 0x46), (ETH_HEADER_LEN + 7, 1), (ETH_HEADER_LEN + 19, 3)] {
            let mut bad = req.clone();
            bad[at] ^= v;
            assert!(icmp_echo_reply(&bad, me, my_ip).is_none(), "byte {at}");
        }
        assert!(icmp_echo_reply(&req[..req.len() - 1], me, my_ip).is_none());
    }
}

#[cfg(test)]
mod vlan_tests {
    use super::*;

    /// The port's VLAN filter: ours stripped, others and untagged (on a VLAN) refused, priority tags (off a
    /// VLAN) stripped, a frame too short to hold the tag taken as untagged.
    #[test]
    fn port_vlan_view_takes_the_ports_frames_only() {
        let eth = |vlan: Option<u16>| {
            let mut f = Vec::new();
            Ethernet { dst: MacAddr([2; 6]), src: MacAddr([4; 6]), vlan: vlan.map(|tci| VlanTag { tci }) }
                .build(ETHERTYPE_IPV4, &mut f);
            f.extend_from_slice(&[9; 30]);
            f
        };
        let plain = eth(None);
        assert_eq!(port_vlan_view(&plain, None), Some(plain.clone()));
        assert_eq!(port_vlan_view(&plain, Some(100)), None);
        assert_eq!(port_vlan_view(&eth(Some(0xA000 | 100)), Some(100)), Some(plain.clone()));
        assert_eq!(port_vlan_view(&eth(Some(101)), Some(100)), None);
        assert_eq!(port_vlan_view(&eth(Some(0xE000)), None), Some(plain.clone()), "priority tag");
        assert_eq!(port_vlan_view(&eth(Some(5)), None), None);
        let short = [&plain[..12], &[0x81, 0x00, 0x00][..]].concat();
        assert_eq!(port_vlan_view(&short, None), Some(short.clone()), "no whole tag: untagged");
    }
}
