pub mod crc;
pub mod decode;
pub mod wire;
