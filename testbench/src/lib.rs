pub mod crc;
pub mod decode;
pub mod model;
pub mod wire;
