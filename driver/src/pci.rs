//! Finding the card on the host's PCIe bus, and what must hold before the VFIO backend can open it: the
//! card enumerated as `10ee:903f`, bound to `vfio-pci`, in an IOMMU group whose `/dev/vfio/N` we may open.
//!
//! Everything is read from sysfs (a root directory is given, so the tests run against a fake tree). Each
//! failure is an error that says what is wrong and the commands that usually fix it; nothing here panics.

use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};

/// The card's PCIe IDs (the QDMA's `pf0_device_id`, `fpga::board::vivado`).
pub const VENDOR_ID: u16 = 0x10EE;
pub const DEVICE_ID: u16 = 0x903F;
/// The BAR the QDMA's AXI4-Lite master answers on (`docs/board-u250.md`, BAR map).
pub const REG_BAR: usize = 2;
/// The smallest register BAR the design needs (the core's registers and the board registers: 2 MiB).
pub const REG_BAR_MIN: u64 = 2 << 20;

/// The environment variable that replaces `/sys` as the root [`find_cards`] reads under. **For tests only**:
/// the CLI tests build a fake sysfs tree (the card bound to another driver, without an IOMMU group, ...) and
/// run `rnic board` against it to check each failure message and exit code without a card. Nothing on a bench
/// sets it; `/dev` is never redirected.
pub const SYSFS_ROOT_ENV: &str = "RNIC_TEST_SYSFS_ROOT";

/// The sysfs root: `/sys`, or the test tree named by [`SYSFS_ROOT_ENV`].
pub fn sysfs_root() -> PathBuf {
    std::env::var_os(SYSFS_ROOT_ENV).filter(|v| !v.is_empty()).map_or_else(|| PathBuf::from("/sys"), PathBuf::from)
}

/// One function of the card as sysfs shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciCard {
    /// Domain:bus:device.function, e.g. `0000:3b:00.0`.
    pub bdf: String,
    pub vendor: u16,
    pub device: u16,
    /// The bound driver's name (`vfio-pci` for us), if any.
    pub driver: Option<String>,
    /// The IOMMU group, if the IOMMU is on.
    pub iommu_group: Option<u32>,
    /// BAR sizes from `resource` (0 where a BAR is not implemented).
    pub bars: Vec<u64>,
}

fn read_hex(p: &Path) -> Result<u64> {
    let s = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    let t = s.trim().trim_start_matches("0x");
    u64::from_str_radix(t, 16).with_context(|| format!("{}: not a hex number: {s:?}", p.display()))
}

/// BAR sizes from a sysfs `resource` file ("start end flags" per line, hex).
pub fn bar_sizes(resource: &str) -> Vec<u64> {
    resource
        .lines()
        .take(6)
        .map(|l| {
            let v: Vec<u64> = l.split_whitespace().filter_map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).ok()).collect();
            match v[..] {
                [start, end, ..] if end > start => end - start + 1,
                _ => 0,
            }
        })
        .collect()
}

/// Every function of ours under `sysfs`/bus/pci/devices, in BDF order.
pub fn find_cards(sysfs: &Path) -> Result<Vec<PciCard>> {
    let dir = sysfs.join("bus/pci/devices");
    let rd = std::fs::read_dir(&dir).with_context(|| format!("reading {} (is sysfs mounted?)", dir.display()))?;
    let mut cards = Vec::new();
    for e in rd {
        let p = e?.path();
        let (Ok(v), Ok(d)) = (read_hex(&p.join("vendor")), read_hex(&p.join("device"))) else {
            continue;
        };
        if (v, d) != (u64::from(VENDOR_ID), u64::from(DEVICE_ID)) {
            continue;
        }
        let name = |l: PathBuf| std::fs::read_link(l).ok().and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()));
        cards.push(PciCard {
            bdf: p.file_name().unwrap_or_default().to_string_lossy().into_owned(),
            vendor: v as u16,
            device: d as u16,
            driver: name(p.join("driver")),
            iommu_group: name(p.join("iommu_group")).and_then(|g| g.parse().ok()),
            bars: std::fs::read_to_string(p.join("resource")).map(|r| bar_sizes(&r)).unwrap_or_default(),
        });
    }
    cards.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    Ok(cards)
}

/// The card to use: the one at `bdf` (a full `0000:3b:00.0` or a short `3b:00.0`), or the only one.
pub fn select(cards: &[PciCard], bdf: Option<&str>) -> Result<PciCard> {
    let want = bdf.map(|b| if b.matches(':').count() == 1 { format!("0000:{b}") } else { b.to_string() });
    match (want, cards) {
        (_, []) => bail!(
            "no card with {VENDOR_ID:04x}:{DEVICE_ID:04x} on the PCIe bus: is the bitstream loaded? After loading it, \
             rescan (`echo 1 > /sys/bus/pci/rescan`) or warm-reboot the host; `lspci -d {VENDOR_ID:04x}:` lists what is there"
        ),
        (Some(w), cs) => cs.iter().find(|c| c.bdf == w).cloned().ok_or_else(|| {
            anyhow!("no card of ours at {w}; found: {}", cs.iter().map(|c| c.bdf.as_str()).collect::<Vec<_>>().join(", "))
        }),
        (None, [c]) => Ok(c.clone()),
        (None, cs) => bail!(
            "{} cards of ours; choose one with --pci: {}",
            cs.len(),
            cs.iter().map(|c| c.bdf.as_str()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// What must hold before VFIO can open `card`: bound to vfio-pci, an IOMMU group, its `/dev/vfio/N` (under
/// `dev`) readable and writable, the register BAR at least [`REG_BAR_MIN`]. Returns the group's device node.
pub fn preflight(card: &PciCard, dev: &Path) -> Result<PathBuf> {
    let b = &card.bdf;
    match card.driver.as_deref() {
        Some("vfio-pci") => {}
        other => {
            let unbind = other.map(|d| format!("echo {b} > /sys/bus/pci/drivers/{d}/unbind; ")).unwrap_or_default();
            bail!(
                "{b} is bound to {}, not vfio-pci. Bind it: modprobe vfio-pci; echo vfio-pci > \
                 /sys/bus/pci/devices/{b}/driver_override; {unbind}echo {b} > /sys/bus/pci/drivers_probe",
                other.unwrap_or("no driver")
            )
        }
    }
    let Some(g) = card.iommu_group else {
        bail!(
            "{b} has no IOMMU group: the IOMMU is off. Turn it on (intel_iommu=on or amd_iommu=on on the kernel \
             command line, VT-d / AMD-Vi in the firmware) and reboot"
        )
    };
    let size = card.bars.get(REG_BAR).copied().unwrap_or(0);
    if size < REG_BAR_MIN {
        bail!(
            "{b}: BAR{REG_BAR} is {size} bytes, the design needs at least {REG_BAR_MIN}: is this our bitstream (the QDMA's \
             AXI4-Lite master on BAR{REG_BAR})?"
        );
    }
    let node = dev.join("vfio").join(g.to_string());
    match std::fs::OpenOptions::new().read(true).write(true).open(&node) {
        Ok(_) => Ok(node),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => bail!(
            "{}: permission denied: run as root, or give your user the group's node (chown $USER {})",
            node.display(),
            node.display()
        ),
        Err(e) => bail!("{}: {e} (is vfio-pci loaded? every device of IOMMU group {g} must be bound to vfio-pci)", node.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake sysfs with our card at `bdf` (driver, group given) and a NIC of another vendor.
    fn fake(root: &Path, bdf: &str, driver: Option<&str>, group: Option<u32>, bar2: u64) {
        let d = root.join("sys/bus/pci/devices").join(bdf);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("vendor"), "0x10ee\n").unwrap();
        std::fs::write(d.join("device"), "0x903f\n").unwrap();
        let mut res = String::new();
        for i in 0..6u64 {
            let size = if i == 2 { bar2 } else if i == 0 { 0x40000 } else { 0 };
            let start = 0xf000_0000 + i * 0x100_0000;
            if size == 0 {
                res.push_str("0x0000000000000000 0x0000000000000000 0x0000000000000000\n");
            } else {
                res.push_str(&format!("0x{start:016x} 0x{:016x} 0x0000000000140204\n", start + size - 1));
            }
        }
        std::fs::write(d.join("resource"), res).unwrap();
        if let Some(drv) = driver {
            let t = root.join("sys/bus/pci/drivers").join(drv);
            std::fs::create_dir_all(&t).unwrap();
            symlink(&t, d.join("driver")).unwrap();
        }
        if let Some(g) = group {
            let t = root.join("sys/kernel/iommu_groups").join(g.to_string());
            std::fs::create_dir_all(&t).unwrap();
            symlink(&t, d.join("iommu_group")).unwrap();
        }
        let other = root.join("sys/bus/pci/devices/0000:00:1f.6");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("vendor"), "0x8086\n").unwrap();
        std::fs::write(other.join("device"), "0x15bb\n").unwrap();
    }

    fn root(name: &str) -> PathBuf {
        let r = std::env::temp_dir().join(format!("rnic-pci-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&r);
        r
    }

    #[test]
    fn the_card_is_found_and_each_missing_step_is_named() {
        // no card at all
        let r = root("none");
        std::fs::create_dir_all(r.join("sys/bus/pci/devices")).unwrap();
        let e = select(&find_cards(&r.join("sys")).unwrap(), None).unwrap_err().to_string();
        assert!(e.contains("no card with 10ee:903f") && e.contains("lspci -d 10ee:"), "{e}");
        // bound to another driver
        let r = root("xdma");
        fake(&r, "0000:3b:00.0", Some("xdma"), Some(27), 4 << 20);
        let cards = find_cards(&r.join("sys")).unwrap();
        assert_eq!(cards.len(), 1, "the other vendor's NIC is not ours");
        assert_eq!(cards[0].bars[2], 4 << 20);
        let c = select(&cards, Some("3b:00.0")).unwrap();
        let e = preflight(&c, &r.join("dev")).unwrap_err().to_string();
        assert!(e.contains("bound to xdma, not vfio-pci") && e.contains("drivers/xdma/unbind"), "{e}");
        assert!(select(&cards, Some("0000:3c:00.0")).unwrap_err().to_string().contains("found: 0000:3b:00.0"));
        // no IOMMU
        let r = root("noiommu");
        fake(&r, "0000:3b:00.0", Some("vfio-pci"), None, 4 << 20);
        let c = select(&find_cards(&r.join("sys")).unwrap(), None).unwrap();
        let e = preflight(&c, &r.join("dev")).unwrap_err().to_string();
        assert!(e.contains("no IOMMU group") && e.contains("intel_iommu=on"), "{e}");
        // a BAR too small: not our bitstream
        let r = root("bar");
        fake(&r, "0000:3b:00.0", Some("vfio-pci"), Some(27), 64 << 10);
        let c = select(&find_cards(&r.join("sys")).unwrap(), None).unwrap();
        assert!(preflight(&c, &r.join("dev")).unwrap_err().to_string().contains("BAR2 is 65536 bytes"));
        // the group's node missing, then there
        let r = root("ok");
        fake(&r, "0000:3b:00.0", Some("vfio-pci"), Some(27), 4 << 20);
        let c = select(&find_cards(&r.join("sys")).unwrap(), None).unwrap();
        let e = preflight(&c, &r.join("dev")).unwrap_err().to_string();
        assert!(e.contains("vfio/27") && e.contains("is vfio-pci loaded"), "{e}");
        std::fs::create_dir_all(r.join("dev/vfio")).unwrap();
        std::fs::write(r.join("dev/vfio/27"), b"").unwrap();
        assert_eq!(preflight(&c, &r.join("dev")).unwrap(), r.join("dev/vfio/27"));
        // two cards: --pci chooses
        fake(&r, "0000:d8:00.0", Some("vfio-pci"), Some(90), 4 << 20);
        let cards = find_cards(&r.join("sys")).unwrap();
        assert!(select(&cards, None).unwrap_err().to_string().contains("2 cards of ours"));
        assert_eq!(select(&cards, Some("d8:00.0")).unwrap().iommu_group, Some(90));
    }
}
