//! Decode a pcap capture (LINKTYPE_ETHERNET) into one line per frame plus a summary, using the golden wire
//! model ([`crate::wire`]). Every RoCEv2 frame is fully parsed and its ICRC checked; ARP and other frames get
//! a short line.
//!
//! Never panics on bad input: a file that is not a pcap is an [`DecodeError`]; a pcap that ends in the middle
//! of a record, or a corrupt record header, ends the decode with a file-level [`Problem`] in the report.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use pcap_file::pcap::PcapParser;
use pcap_file::{DataLink, PcapError};
use thiserror::Error;

use crate::wire::frame::{
    ARP_OP_REPLY, ARP_OP_REQUEST, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ROCE_V1, IP_PROTO_TCP, IP_PROTO_UDP,
};
use crate::wire::opcode::Opcode;
use crate::wire::{parse_ethernet, ExtHeader, Frame, IpHeader, RoceFrame};

/// Why a capture could not be decoded at all.
#[derive(Debug, Error)]
pub enum DecodeError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("not a pcap file: {0}")]
    NotPcap(String),
    #[error("unsupported pcap link type {0} (only LINKTYPE_ETHERNET = 1 is supported)")]
    UnsupportedLinkType(u32),
}

/// A problem found in a frame or in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Problem {
    /// A RoCEv2 frame whose ICRC is wrong.
    BadIcrc,
    /// A frame that does not parse (bad IP checksum, unknown opcode, bad lengths, ...).
    Malformed,
    /// A frame that ends early (captured shorter than its headers say).
    Truncated,
    /// The pcap file ends in the middle of a record.
    TruncatedFile,
    /// A pcap record header that makes no sense.
    CorruptRecord,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Problem::BadIcrc => "bad ICRC",
            Problem::Malformed => "malformed frame",
            Problem::Truncated => "truncated frame",
            Problem::TruncatedFile => "truncated pcap file",
            Problem::CorruptRecord => "corrupt pcap record",
        })
    }
}

/// One problem: the frame number (1-based; for file problems, the number the next frame would have had), its
/// kind and a one-line explanation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProblemRecord {
    pub frame: usize,
    pub problem: Problem,
    pub detail: String,
}

/// The decoded capture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecodeReport {
    /// One line per frame, in capture order.
    pub lines: Vec<String>,
    /// Number of frame records read.
    pub frames: usize,
    /// Number of frames that parsed as RoCEv2.
    pub roce_frames: usize,
    /// RoCEv2 frames per opcode name.
    pub opcode_counts: BTreeMap<String, usize>,
    /// Non-RoCE frames per kind ("ARP who-has", "TCP", ...).
    pub other_counts: BTreeMap<String, usize>,
    /// Every problem found.
    pub problems: Vec<ProblemRecord>,
}

impl DecodeReport {
    /// Count of problems per kind.
    pub fn problem_counts(&self) -> BTreeMap<Problem, usize> {
        let mut m = BTreeMap::new();
        for p in &self.problems {
            *m.entry(p.problem).or_insert(0) += 1;
        }
        m
    }

    /// True when every RoCEv2 frame is well formed with a good ICRC, no frame failed to parse, and the file
    /// was read to its end.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, frame: usize, problem: Problem, detail: String) {
        self.problems.push(ProblemRecord { frame, problem, detail });
    }
}

impl fmt::Display for DecodeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lines {
            writeln!(f, "{l}")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "{} frames, {} RoCEv2, {} other",
            self.frames,
            self.roce_frames,
            self.other_counts.values().sum::<usize>()
        )?;
        for (name, n) in &self.opcode_counts {
            writeln!(f, "  {name:<36} {n}")?;
        }
        for (name, n) in &self.other_counts {
            writeln!(f, "  {name:<36} {n}")?;
        }
        if self.problems.is_empty() {
            writeln!(f, "problems: none")?;
        } else {
            writeln!(f, "problems:")?;
            for (p, n) in self.problem_counts() {
                writeln!(f, "  {:<36} {n}", p.to_string())?;
            }
            for p in &self.problems {
                writeln!(f, "  frame {}: {}: {}", p.frame, p.problem, p.detail)?;
            }
        }
        write!(f, "result: {}", if self.ok() { "OK" } else { "FAIL" })
    }
}

/// Decode the pcap file at `path`.
pub fn decode_pcap(path: &Path) -> Result<DecodeReport, DecodeError> {
    let data = std::fs::read(path).map_err(|source| DecodeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    decode_bytes(&data)
}

const PCAP_MAGICS: [u32; 4] = [0xA1B2_C3D4, 0xD4C3_B2A1, 0xA1B2_3C4D, 0x4D3C_B2A1];
const PCAPNG_MAGIC: u32 = 0x0A0D_0D0A;

/// Decode a pcap held in memory.
pub fn decode_bytes(data: &[u8]) -> Result<DecodeReport, DecodeError> {
    let magic = data.get(..4).map(|m| u32::from_be_bytes([m[0], m[1], m[2], m[3]]));
    match magic {
        None => return Err(DecodeError::NotPcap(format!("file too short ({} bytes)", data.len()))),
        Some(PCAPNG_MAGIC) => {
            return Err(DecodeError::NotPcap(
                "pcapng is not supported (convert with `editcap -F pcap`)".into(),
            ))
        }
        Some(m) if !PCAP_MAGICS.contains(&m) => {
            return Err(DecodeError::NotPcap(format!("bad magic number 0x{m:08x}")))
        }
        _ => {}
    }
    let (mut rest, parser) = match PcapParser::new(data) {
        Ok(x) => x,
        Err(PcapError::IncompleteBuffer) => {
            return Err(DecodeError::NotPcap(format!(
                "file too short for the 24-byte pcap header ({} bytes)",
                data.len()
            )))
        }
        Err(e) => return Err(DecodeError::NotPcap(e.to_string())),
    };
    let header = parser.header();
    if header.datalink != DataLink::ETHERNET {
        return Err(DecodeError::UnsupportedLinkType(header.datalink.into()));
    }

    let mut report = DecodeReport::default();
    while !rest.is_empty() {
        let n = report.frames + 1;
        match parser.next_raw_packet(rest) {
            Ok((r, pkt)) => {
                rest = r;
                report.frames = n;
                decode_frame(&mut report, n, &pkt.data, pkt.orig_len as usize);
            }
            Err(PcapError::IncompleteBuffer) => {
                let detail = format!("file ends inside record {n} ({} bytes left)", rest.len());
                report.lines.push(format!("{n:>5}  {detail}"));
                report.problem(n, Problem::TruncatedFile, detail);
                break;
            }
            Err(e) => {
                report.lines.push(format!("{n:>5}  corrupt record: {e}"));
                report.problem(n, Problem::CorruptRecord, e.to_string());
                break;
            }
        }
    }
    Ok(report)
}

fn decode_frame(report: &mut DecodeReport, n: usize, bytes: &[u8], orig_len: usize) {
    let capture_note = (orig_len > bytes.len()).then(|| format!(" (captured {} of {} bytes)", bytes.len(), orig_len));
    match parse_ethernet(bytes) {
        Ok(Frame::Roce(f)) => {
            report.roce_frames += 1;
            let name = f.packet.opcode().map_or("?", Opcode::name);
            *report.opcode_counts.entry(name.to_string()).or_insert(0) += 1;
            let icrc_ok = f.icrc_ok();
            report.lines.push(format!("{n:>5}  {}", roce_line(&f)));
            if !icrc_ok {
                let want = f.compute_icrc().unwrap_or(0);
                let got = f.icrc_override.unwrap_or(want);
                report.problem(
                    n,
                    Problem::BadIcrc,
                    format!("{name}: wire ICRC 0x{got:08x}, computed 0x{want:08x}"),
                );
            }
        }
        Ok(Frame::Arp(a)) => {
            let (kind, text) = match a.arp.oper {
                ARP_OP_REQUEST => ("ARP who-has", format!("who-has {} tell {}", a.arp.tpa, a.arp.spa)),
                ARP_OP_REPLY => ("ARP is-at", format!("{} is-at {}", a.arp.spa, a.arp.sha)),
                op => ("ARP other", format!("op {op}")),
            };
            *report.other_counts.entry(kind.to_string()).or_insert(0) += 1;
            report
                .lines
                .push(format!("{n:>5}  {} -> {}  ARP {text}", a.eth.src, a.eth.dst));
        }
        Ok(Frame::Other(o)) => {
            let (kind, text) = match o.ip {
                Some(ip) => {
                    let proto = match ip.protocol {
                        IP_PROTO_TCP => "TCP".to_string(),
                        IP_PROTO_UDP => "UDP".to_string(),
                        p => format!("IP proto {p}"),
                    };
                    let ports = ip.ports.map_or(String::new(), |(s, d)| format!(" {s} -> {d}"));
                    (proto.clone(), format!("{} -> {}  {proto}{ports}", ip.src, ip.dst))
                }
                None => {
                    let what = match o.ethertype {
                        ETHERTYPE_ROCE_V1 => "RoCE v1 (not supported by rxe)".to_string(),
                        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => "IP".to_string(),
                        t => format!("ethertype 0x{t:04x}"),
                    };
                    (what.clone(), format!("{} -> {}  {what}", o.eth.src, o.eth.dst))
                }
            };
            *report.other_counts.entry(kind).or_insert(0) += 1;
            report.lines.push(format!("{n:>5}  {text}, {} bytes", o.bytes.len()));
        }
        Err(e) => {
            let problem = if e.is_truncated() || capture_note.is_some() {
                Problem::Truncated
            } else {
                Problem::Malformed
            };
            let detail = format!("{e}{}", capture_note.unwrap_or_default());
            report.lines.push(format!(
                "{n:>5}  {}  {}: {detail}",
                addresses(bytes),
                problem_word(problem)
            ));
            report.problem(n, problem, detail);
        }
    }
}

fn problem_word(p: Problem) -> &'static str {
    match p {
        Problem::Truncated => "TRUNCATED",
        _ => "MALFORMED",
    }
}

/// Best-effort "src -> dst" of a frame that did not parse: IP addresses when the IP header is there, else MACs.
fn addresses(bytes: &[u8]) -> String {
    let Ok((eth, ethertype, off)) = crate::wire::Ethernet::parse(bytes) else {
        return format!("{} bytes", bytes.len());
    };
    let l3 = &bytes[off..];
    match ethertype {
        ETHERTYPE_IPV4 if l3.len() >= 20 => {
            format!(
                "{} -> {}",
                std::net::Ipv4Addr::new(l3[12], l3[13], l3[14], l3[15]),
                std::net::Ipv4Addr::new(l3[16], l3[17], l3[18], l3[19])
            )
        }
        ETHERTYPE_IPV6 if l3.len() >= 40 => {
            let a = |o: usize| {
                let mut x = [0u8; 16];
                x.copy_from_slice(&l3[o..o + 16]);
                std::net::Ipv6Addr::from(x)
            };
            format!("{} -> {}", a(8), a(24))
        }
        _ => format!("{} -> {}", eth.src, eth.dst),
    }
}

/// The one-line description of a RoCEv2 frame.
pub fn roce_line(f: &RoceFrame) -> String {
    use std::fmt::Write;
    let p = &f.packet;
    let b = &p.bth;
    let mut s = format!("{} -> {}", f.ip.src(), f.ip.dst());
    if let Some(tag) = f.eth.vlan {
        let _ = write!(s, " vlan {} pcp {}", tag.vid(), tag.pcp());
    }
    if let IpHeader::V4(ip) = &f.ip {
        if ip.tos != 0 {
            let _ = write!(s, " tos 0x{:02x}", ip.tos);
        }
    }
    let name = p.opcode().map_or("?", Opcode::name);
    let _ = write!(
        s,
        "  udp {}->{}  {name} qpn 0x{:06x} psn {} ack {}",
        f.udp.sport, f.udp.dport, b.dest_qpn, b.psn, b.ack_req as u8
    );
    if b.se {
        s.push_str(" SE");
    }
    if b.mig_req {
        s.push_str(" M");
    }
    if b.fecn || b.becn {
        let _ = write!(s, " fecn {} becn {}", b.fecn as u8, b.becn as u8);
    }
    if b.pkey != crate::wire::headers::DEFAULT_PKEY {
        let _ = write!(s, " pkey 0x{:04x}", b.pkey);
    }
    if b.tver != 0 {
        let _ = write!(s, " tver {}", b.tver);
    }
    let op = p.opcode();
    for h in &p.ext {
        match h {
            ExtHeader::Rdeth(x) => {
                let _ = write!(s, " | RDETH een 0x{:06x}", x.een);
            }
            ExtHeader::Deth(x) => {
                let _ = write!(s, " | DETH qkey 0x{:08x} src_qp 0x{:06x}", x.qkey, x.src_qp);
            }
            ExtHeader::Reth(x) => {
                let _ = write!(s, " | RETH va 0x{:x} rkey 0x{:x} len {}", x.va, x.rkey, x.dma_len);
            }
            ExtHeader::Aeth(x) => {
                let _ = write!(s, " | AETH 0x{:02x} {} msn {}", x.syndrome, x.kind(), x.msn);
            }
            ExtHeader::AtomicEth(x) => {
                let fa = matches!(op, Some(Opcode::RcFetchAdd | Opcode::RdFetchAdd));
                let _ = write!(
                    s,
                    " | AtomicETH va 0x{:x} rkey 0x{:x} {} 0x{:x} compare 0x{:x}",
                    x.va,
                    x.rkey,
                    if fa { "add" } else { "swap" },
                    x.swap_add,
                    x.compare
                );
            }
            ExtHeader::AtomicAckEth(x) => {
                let _ = write!(s, " | AtomicAckETH orig 0x{:x}", x.orig);
            }
            ExtHeader::ImmDt(x) => {
                let _ = write!(s, " | imm 0x{:08x}", x.imm);
            }
            ExtHeader::Ieth(x) => {
                let _ = write!(s, " | IETH rkey 0x{:x}", x.rkey);
            }
            ExtHeader::Feth(x) => {
                let _ = write!(s, " | FETH sel {} plt {}", x.selectivity(), x.placement_type());
            }
            ExtHeader::MaskedCmpSwapEth(x) => {
                let _ = write!(
                    s,
                    " | MaskedCmpSwapETH va 0x{:x} rkey 0x{:x} swap 0x{:x} compare 0x{:x} swap_mask 0x{:x} compare_mask 0x{:x}",
                    x.va, x.rkey, x.swap, x.compare, x.swap_mask, x.compare_mask
                );
            }
            ExtHeader::MaskedFetchAddEth(x) => {
                let _ = write!(
                    s,
                    " | MaskedFetchAddETH va 0x{:x} rkey 0x{:x} add 0x{:x} boundary 0x{:x}",
                    x.va, x.rkey, x.add, x.field_boundary
                );
            }
            ExtHeader::CnpReserved(_) => s.push_str(" | CNP"),
        }
    }
    let _ = write!(s, " | payload {}", p.payload.len());
    // a datagram to QP1 is a MAD: its class, method, attribute and, for a CM message, the message's fields
    if b.dest_qpn == 1 && p.deth().is_some() {
        match crate::wire::mad::Mad::parse(&p.payload) {
            Ok(m) => {
                let _ = write!(s, " | {}", m.summary());
            }
            Err(e) => {
                let _ = write!(s, " | MAD unreadable: {e}");
            }
        }
    }
    if b.pad_cnt != 0 {
        let _ = write!(s, " pad {}", b.pad_cnt);
    }
    if f.icrc_ok() {
        s.push_str(" | ICRC ok");
    } else {
        let want = f.compute_icrc().unwrap_or(0);
        let _ = write!(
            s,
            " | ICRC BAD (wire 0x{:08x}, want 0x{want:08x})",
            f.icrc_override.unwrap_or(want)
        );
    }
    s
}
