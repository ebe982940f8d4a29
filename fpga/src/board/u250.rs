//! The AMD Alveo U250 as the board layer sees it: the part, the pins the board top uses, and where each fact
//! comes from (`docs/board-u250.md` lists the sources in full). A second card is a file like this one plus
//! its constraints.
//!
//! Sources, cited per pin below:
//! * **UG1289** (Alveo U200/U250 user guide, v1.1.1), QSFP and miscellaneous-I/O tables;
//! * **AU250 board files** (`xilinx.com:au250:part0:1.3`: `board.xml`, `part0_pins.xml`, `preset.xml`), as
//!   shipped in the XilinxBoardStore and copied in Xilinx/open-nic-shell `board_files/Xilinx/au250/1.3/`;
//! * **Corundum** `fpga/mqnic/Alveo/fpga_100g/fpga_au200.xdc` (AU200 and AU250 share the board pinout) and
//!   **open-nic-shell** `constr/au250/pins.xdc`.

/// The FPGA.
pub const PART: &str = "xcu250-figd2104-2L-e";
/// `BOARD_KIND` register value.
pub const KIND: u64 = 0x0250;

/// A top-level pin of the board top.
#[derive(Clone, Copy, Debug)]
pub struct Pin {
    /// the board top's port (rust-hdl name, `[bit]` for a bus bit)
    pub port: &'static str,
    pub bit: Option<usize>,
    pub loc: &'static str,
    /// `None`: a GT reference-clock pin (no IO standard: the GT's dedicated input)
    pub iostandard: Option<&'static str>,
    /// extra properties (`PULLUP`, `DRIVE`)
    pub extra: &'static [(&'static str, &'static str)],
    pub source: &'static str,
}

const CDM: &str = "Corundum fpga_au200.xdc; open-nic-shell constr/au250/pins.xdc";
const BF: &str = "AU250 board files 1.3 part0_pins.xml; Corundum fpga_au200.xdc";
const UG_Q: &str = "UG1289 QSFP table (p.18); AU250 part0_pins.xml; Corundum fpga_au200.xdc";

/// Every pin the board top places. The GT serial lanes (PCIe x16 in quads 224-227, QSFP0 in quad 231,
/// channels X1Y44-X1Y47) are placed by the IPs from their `select_quad` / `GT_GROUP_SELECT` settings
/// (`vivado::ip_tcl`), not here.
pub const PINS: &[Pin] = &[
    // PCIe: 100 MHz reference clock (MGTREFCLK0 of quad 226) and PERST#
    Pin { port: "pcie_refclk_p", bit: None, loc: "AM11", iostandard: None, extra: &[], source: CDM },
    Pin { port: "pcie_refclk_n", bit: None, loc: "AM10", iostandard: None, extra: &[], source: CDM },
    Pin { port: "pcie_perstn", bit: None, loc: "BD21", iostandard: Some("LVCMOS12"), extra: &[("PULLUP", "true")], source: "UG1289 miscellaneous I/O (PCIE_PERST_LS); Corundum fpga_au200.xdc" },
    // QSFP0: 156.25 MHz on MGTREFCLK0 of quad 231, the cage's sideband in bank 64
    Pin { port: "qsfp0_refclk_p", bit: None, loc: "M11", iostandard: None, extra: &[], source: BF },
    Pin { port: "qsfp0_refclk_n", bit: None, loc: "M10", iostandard: None, extra: &[], source: BF },
    Pin { port: "qsfp0_modsell", bit: None, loc: "BE16", iostandard: Some("LVCMOS12"), extra: &[("DRIVE", "8")], source: UG_Q },
    Pin { port: "qsfp0_resetl", bit: None, loc: "BE17", iostandard: Some("LVCMOS12"), extra: &[("DRIVE", "8")], source: UG_Q },
    Pin { port: "qsfp0_modprsl", bit: None, loc: "BE20", iostandard: Some("LVCMOS12"), extra: &[("PULLUP", "true")], source: UG_Q },
    Pin { port: "qsfp0_intl", bit: None, loc: "BE21", iostandard: Some("LVCMOS12"), extra: &[("PULLUP", "true")], source: UG_Q },
    Pin { port: "qsfp0_lpmode", bit: None, loc: "BD18", iostandard: Some("LVCMOS12"), extra: &[("DRIVE", "8")], source: UG_Q },
    // free-running 300 MHz (the CMAC's init clock is made from it)
    Pin { port: "clk_300_p", bit: None, loc: "AY37", iostandard: Some("LVDS"), extra: &[], source: "UG1289 clocks (SYSCLK0, 300 MHz); Corundum fpga_au200.xdc (clk_300mhz_0)" },
    Pin { port: "clk_300_n", bit: None, loc: "AY38", iostandard: Some("LVDS"), extra: &[], source: "UG1289 clocks (SYSCLK0, 300 MHz); Corundum fpga_au200.xdc (clk_300mhz_0)" },
    // user LEDs
    Pin { port: "led", bit: Some(0), loc: "BC21", iostandard: Some("LVCMOS12"), extra: &[("DRIVE", "8")], source: CDM },
    Pin { port: "led", bit: Some(1), loc: "BB21", iostandard: Some("LVCMOS12"), extra: &[("DRIVE", "8")], source: CDM },
    Pin { port: "led", bit: Some(2), loc: "BA20", iostandard: Some("LVCMOS12"), extra: &[("DRIVE", "8")], source: CDM },
];

/// Reference clocks: port, period (ns), name.
pub const CLOCKS: &[(&str, f64, &str)] = &[
    ("pcie_refclk_p", 10.0, "pcie_refclk"),
    ("qsfp0_refclk_p", 6.4, "qsfp0_refclk"),
    ("clk_300_p", 3.333, "clk_300"),
];

/// Bitstream and configuration properties for the U250's configuration flash (SPI x4, 1.8 V bank 0; as
/// Corundum's `fpga_au200.xdc` and open-nic-shell's `constr/au250/general.xdc` set them): what
/// rust-hdl's `generate_xdc` trailer (3.3 V, `CFGBVS VCCO`) gets wrong for this card.
pub const BITSTREAM: &[(&str, &str)] = &[
    ("CFGBVS", "GND"),
    ("CONFIG_VOLTAGE", "1.8"),
    ("CONFIG_MODE", "SPIx4"),
    ("BITSTREAM.CONFIG.CONFIGFALLBACK", "Enable"),
    ("BITSTREAM.GENERAL.COMPRESS", "TRUE"),
    ("BITSTREAM.CONFIG.SPI_BUSWIDTH", "4"),
    ("BITSTREAM.CONFIG.SPI_32BIT_ADDR", "YES"),
    ("BITSTREAM.CONFIG.SPI_FALL_EDGE", "YES"),
    ("BITSTREAM.CONFIG.UNUSEDPIN", "PULLUP"),
];
