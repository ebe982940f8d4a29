//! IPv6 neighbour discovery, the part an RoCEv2 endpoint needs (RFC 4861): a Neighbor Solicitation for our
//! address is answered with a Neighbor Advertisement, as ARP is for IPv4. The rules here are the RTL's
//! (`rtl::wire::ndp::NdResponder` follows them byte for byte).

use super::frame::{internet_checksum, MacAddr, ETHERTYPE_IPV6, ETH_HEADER_LEN, ETH_MIN_FRAME_LEN, IPV6_HEADER_LEN};
use std::net::Ipv6Addr;

/// IPv6 next header of ICMPv6.
pub const IP_PROTO_ICMPV6: u8 = 58;
/// ICMPv6 types (RFC 4861 section 4).
pub const ND_SOLICIT: u8 = 135;
pub const ND_ADVERT: u8 = 136;
/// Source / target link-layer address options.
pub const ND_OPT_SLLA: u8 = 1;
pub const ND_OPT_TLLA: u8 = 2;
/// Hop limit of every ND message (a node drops ND with another: proof it was not forwarded).
pub const ND_HOP_LIMIT: u8 = 255;
/// Advertisement flags: Solicited and Override (not a router).
pub const ND_ADVERT_FLAGS: u8 = 0x60;
/// ICMPv6 bytes of a solicitation without options, and of our advertisement (with its TLLA option).
pub const ND_SOLICIT_LEN: usize = 24;
pub const ND_ADVERT_LEN: usize = 32;
/// The longest solicitation answered (ICMPv6 bytes): the frame fits two 64-byte beats (14 + 40 + 74 = 128).
pub const ND_SOLICIT_MAX_LEN: usize = (128 - ETH_HEADER_LEN - IPV6_HEADER_LEN) / 8 * 8;

/// The ICMPv6 checksum (RFC 4443 section 2.3) of `msg` (its checksum field as it is) from `src` to `dst`:
/// 0 when a received message's checksum is right.
pub fn icmpv6_checksum(src: &[u8; 16], dst: &[u8; 16], msg: &[u8]) -> u16 {
    let mut v = Vec::with_capacity(40 + msg.len());
    v.extend_from_slice(src);
    v.extend_from_slice(dst);
    v.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    v.extend_from_slice(&[0, 0, 0, IP_PROTO_ICMPV6]);
    v.extend_from_slice(msg);
    internet_checksum(&v)
}

/// The solicited-node multicast address of `a` (ff02::1:ffXX:XXXX) and its Ethernet address (33:33:ff:XX:XX:XX).
pub fn solicited_node(a: Ipv6Addr) -> (Ipv6Addr, MacAddr) {
    let o = a.octets();
    let m = Ipv6Addr::new(0xFF02, 0, 0, 0, 0, 1, 0xFF00 | u16::from(o[13]), u16::from_be_bytes([o[14], o[15]]));
    (m, MacAddr([0x33, 0x33, 0xFF, o[13], o[14], o[15]]))
}

/// A Neighbor Solicitation from (`mac`, `src`) for `target`, to its solicited-node multicast address, with the
/// source link-layer address option, every field as Linux sends it.
pub fn neighbour_solicitation(mac: MacAddr, src: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    let (dst, dst_mac) = solicited_node(target);
    let mut msg = vec![ND_SOLICIT, 0, 0, 0, 0, 0, 0, 0];
    msg.extend_from_slice(&target.octets());
    msg.extend_from_slice(&[ND_OPT_SLLA, 1]);
    msg.extend_from_slice(&mac.0);
    nd_frame(dst_mac, mac, src, dst, &mut msg)
}

/// An Ethernet/IPv6 frame carrying the ICMPv6 message `msg` (its checksum filled in), hop limit 255, unpadded.
pub fn nd_frame(dst_mac: MacAddr, src_mac: MacAddr, src: Ipv6Addr, dst: Ipv6Addr, msg: &mut [u8]) -> Vec<u8> {
    msg[2..4].copy_from_slice(&[0, 0]);
    let ck = icmpv6_checksum(&src.octets(), &dst.octets(), msg);
    msg[2..4].copy_from_slice(&ck.to_be_bytes());
    let mut f = Vec::with_capacity(ETH_HEADER_LEN + IPV6_HEADER_LEN + msg.len());
    f.extend_from_slice(&dst_mac.0);
    f.extend_from_slice(&src_mac.0);
    f.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    f.extend_from_slice(&[IP_PROTO_ICMPV6, ND_HOP_LIMIT]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(msg);
    f
}

/// The Neighbor Advertisement the RNIC sends for `frame`, or None when it sends none. The rules:
/// - answered: an untagged IPv6 frame of at most 128 bytes (two 64-byte beats, trailers included), next header ICMPv6, hop limit 255, payload length
///   24..=[`ND_SOLICIT_MAX_LEN`] and a multiple of 8 (ND options are 8-byte units) and all of it in the frame, ICMPv6 type 135 code 0 with a right checksum,
///   target `my_ip`, from a unicast source (not :: — duplicate address detection is the host's business, and
///   not multicast). The options are not looked at (RFC 4861 7.1.1 asks only that their lengths be non-zero:
///   not checked either).
/// - the advertisement: Ethernet to the solicitation's source MAC from `my_mac`; IPv6 (traffic class and flow
///   label 0, hop limit 255) from `my_ip` to the solicitation's source; ICMPv6 type 136, flags Solicited and
///   Override, target `my_ip`, the target link-layer address option with `my_mac`.
pub fn neighbour_advertisement(frame: &[u8], my_mac: MacAddr, my_ip: Ipv6Addr) -> Option<Vec<u8>> {
    let ip = ETH_HEADER_LEN;
    let icmp = ip + IPV6_HEADER_LEN;
    if frame.len() < icmp + ND_SOLICIT_LEN
        || frame.len() > 128
        || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_IPV6
        || frame[ip] >> 4 != 6
    {
        return None;
    }
    let plen = usize::from(u16::from_be_bytes([frame[ip + 4], frame[ip + 5]]));
    let src: [u8; 16] = frame[ip + 8..ip + 24].try_into().unwrap();
    let dst: [u8; 16] = frame[ip + 24..ip + 40].try_into().unwrap();
    if frame[ip + 6] != IP_PROTO_ICMPV6
        || frame[ip + 7] != ND_HOP_LIMIT
        || !(ND_SOLICIT_LEN..=ND_SOLICIT_MAX_LEN).contains(&plen)
        || plen % 8 != 0
        || icmp + plen > frame.len()
        || frame[icmp] != ND_SOLICIT
        || frame[icmp + 1] != 0
        || frame[icmp + 8..icmp + 24] != my_ip.octets()
        || src == [0; 16]
        || src[0] == 0xFF
        || icmpv6_checksum(&src, &dst, &frame[icmp..icmp + plen]) != 0
    {
        return None;
    }
    let mut msg = vec![ND_ADVERT, 0, 0, 0, ND_ADVERT_FLAGS, 0, 0, 0];
    msg.extend_from_slice(&my_ip.octets());
    msg.extend_from_slice(&[ND_OPT_TLLA, 1]);
    msg.extend_from_slice(&my_mac.0);
    let mut src_mac = [0u8; 6];
    src_mac.copy_from_slice(&frame[6..12]);
    let mut out = nd_frame(MacAddr(src_mac), my_mac, my_ip, Ipv6Addr::from(src), &mut msg);
    if out.len() < ETH_MIN_FRAME_LEN {
        out.resize(ETH_MIN_FRAME_LEN, 0);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x11]);
    const THEM: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 1]);

    fn addrs() -> (Ipv6Addr, Ipv6Addr) {
        ("fd00::11".parse().unwrap(), "fd00::1".parse().unwrap())
    }

    /// A solicitation for our address is answered: to its sender, the checksum right, our MAC in the option;
    /// any byte changed in the solicitation's IPv6 header or message (but the traffic class, the flow label
    /// and the unused destination) and it is not.
    #[test]
    fn a_solicitation_for_our_address_is_answered_and_a_damaged_one_is_not() {
        let (me, them) = addrs();
        let ns = neighbour_solicitation(THEM, them, me);
        assert_eq!(ns.len(), 86);
        let na = neighbour_advertisement(&ns, ME, me).expect("answered");
        assert_eq!(na.len(), 14 + 40 + ND_ADVERT_LEN);
        assert_eq!(&na[0..6], &THEM.0);
        assert_eq!(&na[6..12], &ME.0);
        assert_eq!(&na[22..38], &me.octets());
        assert_eq!(&na[38..54], &them.octets());
        assert_eq!((na[20], na[21], na[54], na[58]), (IP_PROTO_ICMPV6, 255, ND_ADVERT, 0x60));
        assert_eq!(&na[62..78], &me.octets());
        assert_eq!(&na[78..86], &[2, 1, 2, 0, 0, 0, 0, 0x11]);
        assert_eq!(icmpv6_checksum(&me.octets(), &them.octets(), &na[54..86]), 0);
        for at in 14..ns.len() {
            // TC/flow label (14..18) are not looked at; the destination (38..54) only through the checksum
            if (15..18).contains(&at) {
                continue;
            }
            let mut bad = ns.clone();
            bad[at] ^= 0x10;
            assert!(neighbour_advertisement(&bad, ME, me).is_none(), "byte {at}");
        }
        // not our address, from ::, cut short, hop limit 64
        assert!(neighbour_advertisement(&neighbour_solicitation(THEM, them, them), ME, me).is_none());
        assert!(neighbour_advertisement(&neighbour_solicitation(THEM, Ipv6Addr::UNSPECIFIED, me), ME, me).is_none());
        assert!(neighbour_advertisement(&ns[..85], ME, me).is_none());
        let mut hl = ns.clone();
        hl[21] = 64;
        assert!(neighbour_advertisement(&hl, ME, me).is_none());
    }

    #[test]
    fn solicited_node_addresses() {
        let (m, mac) = solicited_node("fd00::12:3456:789a".parse().unwrap());
        assert_eq!(m, "ff02::1:ff56:789a".parse::<Ipv6Addr>().unwrap());
        assert_eq!(mac, MacAddr([0x33, 0x33, 0xFF, 0x56, 0x78, 0x9A]));
    }
}
