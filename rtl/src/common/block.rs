//! [`logic_block!`]: a rust-hdl block declared with its `Default` in one place. A block's ports, registers,
//! sub-blocks and constants are each declared once, with the value it starts with after `=` wherever that is
//! not `Default::default()` (constants, tables, sub-blocks built with parameters); the macro writes the
//! struct (with `#[derive(LogicBlock)]`) and its `impl Default`. Without it every field is named twice, once
//! in the struct and once in a `Default` that mostly says `Default::default()`.
//!
//! ```ignore
//! logic_block! {
//!     /// A counter that wraps at 100.
//!     pub struct Count100 {
//!         pub clock: Signal<In, Clock>,
//!         pub value: Signal<Out, Bits<7>>,
//!         n: DFF<Bits<7>>,
//!         last: Constant<Bits<7>> = k(99),
//!     }
//! }
//! ```

/// Declare a rust-hdl block and its `Default` (see the module documentation).
#[macro_export]
macro_rules! logic_block {
    (
        $(#[$sm:meta])*
        $sv:vis struct $name:ident {
            $(
                $(#[$fm:meta])*
                $fv:vis $f:ident : $t:ty $(= $e:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$sm])*
        #[derive(LogicBlock)]
        $sv struct $name {
            $( $(#[$fm])* $fv $f : $t, )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $( $f: $crate::logic_block!(@init $($e)?), )* }
            }
        }
    };
    (@init) => {
        Default::default()
    };
    (@init $e:expr) => {
        $e
    };
}

/// One clock cycle of a block in rust-hdl's simulator, for unit tests: the clock low and settled, then high
/// and settled (outputs show the registers after the rising edge).
#[macro_export]
macro_rules! tick {
    ($u:expr) => {{
        let u = &mut *$u;
        u.clock.next = false.into();
        rust_hdl::prelude::simulate(u, 20);
        u.clock.next = true.into();
        rust_hdl::prelude::simulate(u, 20);
    }};
}

#[cfg(test)]
mod tests {
    use crate::common::consts::k;
    use rust_hdl::prelude::*;

    crate::logic_block! {
        /// Counts to 99 and wraps.
        pub struct Count100 {
            pub clock: Signal<In, Clock>,
            pub value: Signal<Out, Bits<7>>,
            n: DFF<Bits<7>>,
            /// the last value
            last: Constant<Bits<7>> = k(99),
            one: Constant<Bits<7>> = k(1),
        }
    }

    impl Logic for Count100 {
        #[hdl_gen]
        fn update(&mut self) {
            dff_setup!(self, clock, n);
            self.value.next = self.n.q.val();
            self.n.d.next = self.n.q.val() + self.one.val();
            if self.n.q.val() == self.last.val() {
                self.n.d.next = bits::<7>(0);
            }
        }
    }

    /// The declared initial values are the block's: it wraps at 100, and its Verilog has the constants.
    #[test]
    fn a_declared_block_has_its_initial_values() {
        let mut u = Count100::default();
        u.connect_all();
        for i in 0..250u64 {
            simulate(&mut u, 10);
            assert_eq!(u.value.val().to_u64(), i % 100);
            u.clock.next = true.into();
            simulate(&mut u, 10);
            u.clock.next = false.into();
        }
        let v = crate::verilog_of(&mut Count100::default());
        assert!(v.contains("last = 7'b1100011;"), "{v}");
    }
}
