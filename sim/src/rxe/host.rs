//! [`HostStack`]: the basic host on our side of the link. It answers ARP (golden wire model), IPv6 neighbour
//! solicitations for its IPv6 address when it has one (golden `ndp` model) and ICMP echo, runs the management
//! TCP stack ([`Mgmt`]) and hands RoCEv2 frames (UDP destination port 4791) to an inner endpoint (the golden
//! model or the RTL). An inner endpoint that answers ARP, ND or echo itself (the RTL) gets those frames instead.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use testbench::wire::frame::{
    icmp_echo_reply, parse_ethernet, ArpFrame, Frame, MacAddr, ARP_OP_REPLY, ARP_OP_REQUEST,
    ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN, ETH_HEADER_LEN, IP_PROTO_TCP, IP_PROTO_UDP,
    ROCE_V2_UDP_DPORT,
};

use testbench::wire::ndp::{neighbour_advertisement, solicited_node, IP_PROTO_ICMPV6};

use super::bridge::{Endpoint, NullEndpoint};
use super::mgmt::Mgmt;

pub use testbench::wire::frame::IP_PROTO_ICMP;

/// Our side's addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostConfig {
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    /// IP MTU of the link (the VM's netdev MTU).
    pub mtu: usize,
    /// Our IPv6 address (RoCEv2 over IPv6), if any: neighbour solicitations for it are answered (by the inner
    /// endpoint when it [`Endpoint::answers_nd`]), and frames to its solicited-node multicast MAC are taken.
    pub ip6: Option<Ipv6Addr>,
}

impl Default for HostConfig {
    /// 10.0.0.2/24, MAC 02:00:00:00:00:02, MTU 1500.
    fn default() -> Self {
        HostConfig {
            mac: MacAddr([0x02, 0, 0, 0, 0, 0x02]),
            ip: Ipv4Addr::new(10, 0, 0, 2),
            prefix_len: 24,
            mtu: 1500,
            ip6: None,
        }
    }
}

/// What the host stack saw and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostStats {
    /// ARP requests for our IP that we answered.
    pub arp_replies_sent: u64,
    /// ICMP echo requests to our IP that we answered.
    pub icmp_echo_replies_sent: u64,
    /// ICMP frames to our IP handed to the inner endpoint (which answers echo itself).
    pub icmp_to_inner: u64,
    /// ARP frames handed to the inner endpoint (which answers and resolves itself).
    pub arp_to_inner: u64,
    /// Neighbour solicitations for our IPv6 address that we answered.
    pub nd_advertisements_sent: u64,
    /// ICMPv6 frames to our IPv6 address (or its solicited-node group) handed to the inner endpoint.
    pub icmpv6_to_inner: u64,
    /// RoCEv2 frames handed to the inner endpoint.
    pub roce_to_inner: u64,
    /// 802.1Q-tagged frames handed to the inner endpoint (the port's VLAN is the RNIC's: it takes its VID's
    /// frames, answers ARP and ND on it, and drops and counts the rest).
    pub vlan_to_inner: u64,
    /// Frames the inner endpoint sent.
    pub frames_from_inner: u64,
    /// TCP segments to our IP handed to the management stack.
    pub tcp_to_mgmt: u64,
    /// Frames the management stack sent (TCP, its ARP requests).
    pub frames_from_mgmt: u64,
    /// Frames not for us or not understood.
    pub ignored: u64,
    /// IPv4 -> MAC pairs learned from ARP (requests and replies).
    pub neighbors: HashMap<Ipv4Addr, MacAddr>,
}

/// The basic host endpoint; `R` is the inner RoCE endpoint ([`NullEndpoint`] by default: RoCE frames are
/// dropped).
pub struct HostStack<R = NullEndpoint> {
    cfg: HostConfig,
    inner: R,
    mgmt: Mgmt,
    stats: HostStats,
}

impl HostStack<NullEndpoint> {
    pub fn new(cfg: HostConfig) -> Self {
        let mgmt = Mgmt::new(
            cfg.mac,
            cfg.ip,
            cfg.prefix_len,
            cfg.mtu,
            u64::from(u32::from(cfg.ip)) ^ 0x5eed,
        );
        HostStack {
            cfg,
            inner: NullEndpoint,
            mgmt,
            stats: HostStats::default(),
        }
    }
}

impl<R: Endpoint> HostStack<R> {
    /// Replace the inner RoCE endpoint.
    pub fn with_roce<R2: Endpoint>(self, inner: R2) -> HostStack<R2> {
        HostStack {
            cfg: self.cfg,
            inner,
            mgmt: self.mgmt,
            stats: self.stats,
        }
    }

    pub fn config(&self) -> &HostConfig {
        &self.cfg
    }

    /// The management TCP stack (clone it before handing the stack to the bridge).
    pub fn mgmt(&self) -> Mgmt {
        self.mgmt.clone()
    }

    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    pub fn inner(&self) -> &R {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    pub fn into_inner(self) -> R {
        self.inner
    }

    fn for_us_v4(&self, l3: &[u8]) -> bool {
        l3.len() >= 20 && l3[16..20] == self.cfg.ip.octets()
    }

    /// An IPv6 packet to our IPv6 address or to its solicited-node group.
    fn for_us_v6(&self, l3: &[u8]) -> bool {
        let Some(ip6) = self.cfg.ip6 else { return false };
        l3.len() >= 40 && (l3[24..40] == ip6.octets() || l3[24..40] == solicited_node(ip6).0.octets())
    }

    /// Our MAC, broadcast, or the solicited-node multicast MAC of our IPv6 address.
    fn mac_for_us(&self, dst: &[u8]) -> bool {
        dst == self.cfg.mac.0
            || dst == MacAddr::BROADCAST.0
            || self.cfg.ip6.is_some_and(|a| dst == solicited_node(a).1 .0)
    }

    fn icmpv6(&mut self, frame: &[u8], now_ns: u64) -> Vec<Vec<u8>> {
        if self.inner.answers_nd() {
            self.stats.icmpv6_to_inner += 1;
            let out = self.inner.on_frame(frame, now_ns);
            return self.out_of_inner(out);
        }
        match self.cfg.ip6.and_then(|a| neighbour_advertisement(frame, self.cfg.mac, a)) {
            Some(na) => {
                self.stats.nd_advertisements_sent += 1;
                vec![na]
            }
            None => {
                self.stats.ignored += 1;
                Vec::new()
            }
        }
    }

    fn out_of_mgmt(&mut self, frames: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        // We answer ARP requests ourselves; smoltcp would answer too (it sees them to learn the neighbor).
        let out: Vec<Vec<u8>> = frames
            .into_iter()
            .filter(
                |f| !matches!(parse_ethernet(f), Ok(Frame::Arp(a)) if a.arp.oper == ARP_OP_REPLY),
            )
            .collect();
        self.stats.frames_from_mgmt += out.len() as u64;
        out
    }

    fn out_of_inner(&mut self, frames: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        self.stats.frames_from_inner += frames.len() as u64;
        frames
    }

    fn arp(&mut self, f: &ArpFrame, raw: &[u8], now_ns: u64) -> Vec<Vec<u8>> {
        let a = f.arp;
        if a.spa != Ipv4Addr::UNSPECIFIED {
            self.stats.neighbors.insert(a.spa, a.sha);
        }
        let mut out = Vec::new();
        if self.inner.answers_arp() {
            // the RNIC answers requests for us and learns from replies to its own requests (the RTL's ARP)
            self.stats.arp_to_inner += 1;
            let i = self.inner.on_frame(raw, now_ns);
            out.extend(self.out_of_inner(i));
        } else if a.tpa != self.cfg.ip {
            self.stats.ignored += 1;
            return Vec::new();
        }
        if a.oper == ARP_OP_REQUEST && a.tpa == self.cfg.ip && !self.inner.answers_arp() {
            out.push(f.reply_from(self.cfg.mac).build());
            self.stats.arp_replies_sent += 1;
        }
        // requests and replies teach the management stack the VM's MAC
        let m = self.mgmt.on_frame(raw, now_ns);
        out.extend(self.out_of_mgmt(m));
        out
    }

    /// Echo requests answered by the golden rules (the RTL's echo responder follows the same).
    fn icmp(&mut self, frame: &[u8]) -> Vec<Vec<u8>> {
        match icmp_echo_reply(frame, self.cfg.mac, self.cfg.ip) {
            Some(r) => {
                self.stats.icmp_echo_replies_sent += 1;
                vec![r]
            }
            None => {
                self.stats.ignored += 1;
                Vec::new()
            }
        }
    }
}

/// Is this an IPv4 or IPv6 UDP datagram to port 4791 (no VLAN)?
pub fn is_roce_v2(frame: &[u8]) -> bool {
    roce_v2_udp(frame).is_some()
}

/// The destination QP of a RoCEv2 frame (its BTH's), if it is one.
pub fn roce_v2_dest_qpn(frame: &[u8]) -> Option<u32> {
    let u = roce_v2_udp(frame)?;
    (u.len() >= 8 + 12).then(|| u32::from_be_bytes([0, u[13], u[14], u[15]]))
}

/// A RoCEv2 frame's UDP header and what follows it (untagged IPv4 or IPv6, UDP destination port 4791).
fn roce_v2_udp(frame: &[u8]) -> Option<&[u8]> {
    if frame.len() < ETH_HEADER_LEN + 20 {
        return None;
    }
    let et = u16::from_be_bytes([frame[12], frame[13]]);
    let l3 = &frame[ETH_HEADER_LEN..];
    let (proto, l4) = match et {
        ETHERTYPE_IPV4 => {
            let ihl = usize::from(l3[0] & 0x0F) * 4;
            let first_fragment = u16::from_be_bytes([l3[6], l3[7]]) & 0x1FFF == 0;
            if !first_fragment || ihl < 20 {
                return None;
            }
            (l3[9], l3.get(ihl..))
        }
        ETHERTYPE_IPV6 if l3.len() >= 40 => (l3[6], l3.get(40..)),
        _ => return None,
    };
    l4.filter(|u| proto == IP_PROTO_UDP && u.len() >= 4 && u16::from_be_bytes([u[2], u[3]]) == ROCE_V2_UDP_DPORT)
}

impl<R: Endpoint> Endpoint for HostStack<R> {
    fn on_frame(&mut self, frame: &[u8], now_ns: u64) -> Vec<Vec<u8>> {
        if frame.len() < ETH_HEADER_LEN {
            self.stats.ignored += 1;
            return Vec::new();
        }
        if !self.mac_for_us(&frame[0..6]) {
            self.stats.ignored += 1;
            return Vec::new();
        }
        if u16::from_be_bytes([frame[12], frame[13]]) == ETHERTYPE_VLAN {
            self.stats.vlan_to_inner += 1;
            let out = self.inner.on_frame(frame, now_ns);
            return self.out_of_inner(out);
        }
        if is_roce_v2(frame) {
            self.stats.roce_to_inner += 1;
            let out = self.inner.on_frame(frame, now_ns);
            return self.out_of_inner(out);
        }
        let et = u16::from_be_bytes([frame[12], frame[13]]);
        match et {
            ETHERTYPE_ARP => match parse_ethernet(frame) {
                Ok(Frame::Arp(a)) => self.arp(&a, frame, now_ns),
                _ => {
                    self.stats.ignored += 1;
                    Vec::new()
                }
            },
            ETHERTYPE_IPV4 if self.for_us_v4(&frame[ETH_HEADER_LEN..]) => {
                match frame[ETH_HEADER_LEN + 9] {
                    IP_PROTO_ICMP if self.inner.answers_icmp() => {
                        self.stats.icmp_to_inner += 1;
                        let out = self.inner.on_frame(frame, now_ns);
                        self.out_of_inner(out)
                    }
                    IP_PROTO_ICMP => self.icmp(frame),
                    IP_PROTO_TCP => {
                        self.stats.tcp_to_mgmt += 1;
                        let m = self.mgmt.on_frame(frame, now_ns);
                        self.out_of_mgmt(m)
                    }
                    _ => {
                        self.stats.ignored += 1;
                        Vec::new()
                    }
                }
            }
            ETHERTYPE_IPV6 if self.for_us_v6(&frame[ETH_HEADER_LEN..]) && frame[ETH_HEADER_LEN + 6] == IP_PROTO_ICMPV6 => {
                self.icmpv6(frame, now_ns)
            }
            _ => {
                self.stats.ignored += 1;
                Vec::new()
            }
        }
    }

    fn poll(&mut self, now_ns: u64) -> Vec<Vec<u8>> {
        let m = self.mgmt.poll(now_ns);
        let mut out = self.out_of_mgmt(m);
        let i = self.inner.poll(now_ns);
        out.extend(self.out_of_inner(i));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testbench::wire::ndp::neighbour_solicitation;

    /// The destination QP the bridge's MAD-only drops go by agrees with the golden parser on every frame of
    /// the rxe CM capture (MADs to QP1, rping's RC traffic, ARP).
    #[test]
    fn dest_qpn_agrees_with_the_golden_parser() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbench/data/rxe-cm.pcap");
        let mut rd = pcap_file::pcap::PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
        let (mut qp1, mut other) = (0, 0);
        while let Some(p) = rd.next_packet() {
            let data = p.unwrap().data.to_vec();
            let want = match testbench::wire::parse_ethernet(&data) {
                Ok(testbench::wire::Frame::Roce(f)) => Some(f.packet.bth.dest_qpn),
                _ => None,
            };
            assert_eq!(roce_v2_dest_qpn(&data), want);
            assert_eq!(is_roce_v2(&data), want.is_some());
            match want {
                Some(1) => qp1 += 1,
                Some(_) => other += 1,
                None => {}
            }
        }
        assert!(qp1 >= 19 && other > 0, "{qp1} MADs, {other} other RoCE frames");
    }

    /// A solicitation for our IPv6 address, sent to its solicited-node multicast MAC as Linux sends it, is
    /// answered with the golden advertisement; one for another address, or with IPv6 off, is not; an endpoint
    /// that answers ND itself gets the frame instead.
    #[test]
    fn neighbour_solicitations_for_our_ipv6_address_are_answered() {
        let vm_mac = MacAddr([0x52, 0x54, 0, 0, 0, 1]);
        let (vm, ours): (Ipv6Addr, Ipv6Addr) = ("fe80::5054:ff:fe00:1".parse().unwrap(), "fd00::2".parse().unwrap());
        let cfg = HostConfig { ip6: Some(ours), ..HostConfig::default() };
        let ns = neighbour_solicitation(vm_mac, vm, ours);
        let mut h = HostStack::new(cfg);
        let out = h.on_frame(&ns, 0);
        assert_eq!(out, vec![neighbour_advertisement(&ns, cfg.mac, ours).unwrap()]);
        assert_eq!(h.stats().nd_advertisements_sent, 1);
        // another target (its own solicited-node MAC, not ours): not taken
        let other = neighbour_solicitation(vm_mac, vm, "fd00::3".parse().unwrap());
        assert!(h.on_frame(&other, 0).is_empty());
        // IPv6 off
        let mut off = HostStack::new(HostConfig::default());
        assert!(off.on_frame(&ns, 0).is_empty());
        assert_eq!(off.stats().nd_advertisements_sent, 0);
        // an endpoint with its own ND responder gets the solicitation
        struct Nd(usize);
        impl Endpoint for Nd {
            fn on_frame(&mut self, _: &[u8], _: u64) -> Vec<Vec<u8>> {
                self.0 += 1;
                Vec::new()
            }
            fn poll(&mut self, _: u64) -> Vec<Vec<u8>> {
                Vec::new()
            }
            fn answers_nd(&self) -> bool {
                true
            }
        }
        let mut h = HostStack::new(cfg).with_roce(Nd(0));
        assert!(h.on_frame(&ns, 0).is_empty());
        assert_eq!((h.inner().0, h.stats().icmpv6_to_inner), (1, 1));
    }
}
