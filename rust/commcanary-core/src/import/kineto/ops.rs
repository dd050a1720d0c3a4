//! What a communication call is: its kind, how its sizes and scalars are
//! read from a `c10d::*` op, and the canonical names of element types.
//!
//! Kinds are the c10d operations; [`Kind::trace_op`] names each as the trace
//! format does (`reduce`, `gather`, `scatter` and anything unknown are
//! custom ops). Sizes follow the reference rule: the message is the larger of
//! the input and output element counts times the element size.

use crate::json::Value;

/// The kind of one communication call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// all_reduce
    AllReduce,
    /// all_gather (tensor or list form)
    AllGather,
    /// reduce_scatter (tensor or list form)
    ReduceScatter,
    /// all_to_all
    AllToAll,
    /// broadcast from a root
    Broadcast,
    /// reduce to a root
    Reduce,
    /// gather to a root
    Gather,
    /// scatter from a root
    Scatter,
    /// point-to-point send
    Send,
    /// point-to-point receive
    Recv,
    /// a collective with no trace equivalent (named by its source)
    Other,
}

impl Kind {
    /// The kind of a letters-only, lowercase collective name (`allreduce`,
    /// `allgatherbase`, …); `None` for control ops (`barrier`, `wait`, …).
    #[must_use]
    pub fn of_normalized(name: &str) -> Option<Kind> {
        Some(match name {
            "wait" | "barrier" | "init" | "broadcastuniquencclid" | "monitoredbarrier" => {
                return None;
            }
            "allreduce" | "allreducecoalesced" => Kind::AllReduce,
            "allgather"
            | "allgatherbase"
            | "allgatherintotensorcoalesced"
            | "allgathercoalesced" => Kind::AllGather,
            "reducescatter" | "reducescatterbase" | "reducescattertensorcoalesced" => {
                Kind::ReduceScatter
            }
            "alltoall" | "alltoallv" | "alltoallbase" => Kind::AllToAll,
            "broadcast" => Kind::Broadcast,
            "reduce" => Kind::Reduce,
            "gather" => Kind::Gather,
            "scatter" => Kind::Scatter,
            "send" => Kind::Send,
            "recv" | "recvanysource" => Kind::Recv,
            _ => Kind::Other,
        })
    }

    /// The trace `op` and whether it needs `custom_op: true`.
    #[must_use]
    pub fn trace_op(self) -> (&'static str, bool) {
        match self {
            Kind::AllReduce => ("all_reduce", false),
            Kind::AllGather => ("all_gather", false),
            Kind::ReduceScatter => ("reduce_scatter", false),
            Kind::AllToAll => ("all_to_all", false),
            Kind::Broadcast => ("broadcast", false),
            Kind::Send => ("send", false),
            Kind::Recv => ("recv", false),
            Kind::Reduce => ("reduce", true),
            Kind::Gather => ("gather", true),
            Kind::Scatter => ("scatter", true),
            Kind::Other => ("other", true),
        }
    }

    /// Point-to-point (one sender, one receiver).
    #[must_use]
    pub fn is_p2p(self) -> bool {
        matches!(self, Kind::Send | Kind::Recv)
    }

    /// Every member waits for every other (no root, no direction).
    #[must_use]
    pub fn is_symmetric(self) -> bool {
        matches!(
            self,
            Kind::AllReduce | Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll | Kind::Other
        )
    }

    /// The `gloo:*` annotation names that execute this kind.
    #[must_use]
    pub fn gloo_names(self) -> &'static [&'static str] {
        match self {
            Kind::AllReduce => &["all_reduce"],
            // gloo implements reduce_scatter with an allreduce.
            Kind::ReduceScatter => &["all_reduce", "reduce_scatter"],
            Kind::AllGather => &["all_gather"],
            Kind::AllToAll => &["all_to_all"],
            Kind::Broadcast => &["broadcast"],
            Kind::Reduce => &["reduce"],
            Kind::Gather => &["gather"],
            Kind::Scatter => &["scatter"],
            Kind::Send => &["send"],
            Kind::Recv => &["recv"],
            Kind::Other => &[],
        }
    }
}

/// NCCL algorithms as kernel names spell them (index 0: unknown).
pub const ALGORITHMS: [&str; 8] = [
    "",
    "ring",
    "tree",
    "nvls",
    "nvls_tree",
    "collnet_direct",
    "collnet_chain",
    "pat",
];

/// The algorithm an NCCL kernel's name carries
/// (`ncclKernel_AllReduce_RING_LL_Sum_float`, `ncclDevKernel_AllGather_RING_LL`),
/// as an index into [`ALGORITHMS`]; 0 when it names none
/// (`ncclDevKernel_SendRecv`, `ncclDevKernel_Generic`).
#[must_use]
pub fn nccl_algorithm(kernel: &str) -> u8 {
    let head = kernel
        .split('(')
        .next()
        .unwrap_or(kernel)
        .to_ascii_uppercase();
    let tokens: Vec<&str> = head.split('_').collect();
    let has = |t: &str| tokens.contains(&t);
    let pair = |a: &str, b: &str| tokens.windows(2).any(|w| w[0] == a && w[1] == b);
    let found = if pair("NVLS", "TREE") || has("NVLSTREE") {
        "nvls_tree"
    } else if has("NVLS") {
        "nvls"
    } else if pair("COLLNET", "DIRECT") || has("COLLNETDIRECT") {
        "collnet_direct"
    } else if pair("COLLNET", "CHAIN") || has("COLLNETCHAIN") {
        "collnet_chain"
    } else if has("RING") {
        "ring"
    } else if has("TREE") {
        "tree"
    } else if has("PAT") {
        "pat"
    } else {
        ""
    };
    ALGORITHMS.iter().position(|a| *a == found).unwrap_or(0) as u8
}

/// Lowercase letters of `name` (`c10d::_allgather_base_` → `cdallgatherbase`
/// is avoided by stripping the `c10d::` prefix first).
#[must_use]
pub fn normalize(name: &str) -> String {
    let name = name.strip_prefix("c10d::").unwrap_or(name);
    name.chars()
        .filter(char::is_ascii_alphabetic)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The canonical dtype and element size of a Kineto type name: c10
/// `ScalarType` names (`Float`, `BFloat16`), C++ names from `gloo:*`
/// annotations (`float`, `long int`, `c10::Half`) and canonical names.
#[must_use]
pub fn dtype(name: &str) -> Option<(&'static str, i64)> {
    let lower = name.trim().to_ascii_lowercase();
    let bare = lower.strip_prefix("c10::").unwrap_or(&lower);
    Some(match bare {
        "float" | "float32" => ("float32", 4),
        "double" | "float64" => ("float64", 8),
        "half" | "float16" => ("float16", 2),
        "bfloat16" => ("bfloat16", 2),
        "long" | "long int" | "int64" | "int64_t" | "long long" => ("int64", 8),
        "int" | "int32" | "int32_t" => ("int32", 4),
        "short" | "short int" | "int16" | "int16_t" => ("int16", 2),
        "char" | "signed char" | "int8" | "int8_t" => ("int8", 1),
        "byte" | "unsigned char" | "uint8" | "uint8_t" => ("uint8", 1),
        "bool" => ("bool", 1),
        "complexhalf" | "complex32" | "complex<c10::half>" => ("complex32", 4),
        "complexfloat" | "complex64" | "complex<float>" => ("complex64", 8),
        "complexdouble" | "complex128" | "complex<double>" => ("complex128", 16),
        "float8_e4m3fn" => ("float8_e4m3fn", 1),
        "float8_e4m3fnuz" => ("float8_e4m3fnuz", 1),
        "float8_e5m2" => ("float8_e5m2", 1),
        "float8_e5m2fnuz" => ("float8_e5m2fnuz", 1),
        _ => return None,
    })
}

/// Element count of one recorded argument's dims: a tensor's shape (`[]` is
/// a scalar tensor only when `is_tensor`), or a list of shapes (summed).
/// Returns `(elements, tensors)`; `None` on negative or overflowing dims.
#[must_use]
pub fn elements(dims: Value<'_>, is_tensor: bool) -> Option<(i64, i64)> {
    if !dims.is_array() {
        return Some((0, 0));
    }
    let nested = dims.elements().any(|d| d.is_array());
    if !nested {
        if dims.is_empty() {
            return Some(if is_tensor { (1, 1) } else { (0, 0) });
        }
        let mut product: i64 = 1;
        for d in dims.elements() {
            let d = d.as_i64().filter(|&d| d >= 0)?;
            product = product.checked_mul(d)?;
        }
        return Some((product, 1));
    }
    let (mut total, mut count) = (0_i64, 0_i64);
    for inner in dims.elements() {
        let (e, c) = elements(inner, true)?;
        total = total.checked_add(e)?;
        count += c;
    }
    Some((total, count))
}

/// Position of the `(output, input)` tensors among a c10d op's arguments,
/// and of its root/peer and tag scalars in `Concrete Inputs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgLayout {
    /// Argument holding the output (or the in-place) tensors.
    pub output: usize,
    /// Argument holding the input tensors (`None`: in-place).
    pub input: Option<usize>,
    /// Concrete input holding the root or the peer.
    pub scalar: Option<usize>,
    /// Concrete input holding the p2p tag.
    pub tag: Option<usize>,
}

/// The argument layout of a c10d op (by its normalized name).
#[must_use]
pub fn layout(normalized: &str) -> ArgLayout {
    let inplace = |scalar: Option<usize>, tag: Option<usize>| ArgLayout {
        output: 0,
        input: None,
        scalar,
        tag,
    };
    match normalized {
        "broadcast" => inplace(Some(2), None),
        "reduce" => inplace(Some(3), None),
        "send" | "recv" => inplace(Some(2), Some(3)),
        "recvanysource" => inplace(None, Some(2)),
        "allreduce" | "allreducecoalesced" => inplace(None, None),
        "gather" | "scatter" => ArgLayout {
            output: 0,
            input: Some(1),
            scalar: Some(3),
            tag: None,
        },
        _ => ArgLayout {
            output: 0,
            input: Some(1),
            scalar: None,
            tag: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{JsonLimits, parse};

    #[test]
    fn names_and_dtypes() {
        assert_eq!(normalize("c10d::_allgather_base_"), "allgatherbase");
        assert_eq!(Kind::of_normalized("allgatherbase"), Some(Kind::AllGather));
        assert_eq!(Kind::of_normalized("barrier"), None);
        assert_eq!(Kind::of_normalized("frobnicate"), Some(Kind::Other));
        assert_eq!(dtype("long int"), Some(("int64", 8)));
        assert_eq!(dtype("c10::BFloat16"), Some(("bfloat16", 2)));
        assert_eq!(dtype("Float"), Some(("float32", 4)));
        assert_eq!(dtype("TensorList"), None);
    }

    #[test]
    fn element_counts() {
        let doc = parse(
            br#"[[[512, 2048]], [4, 4], [], [[2], [3]]]"#,
            JsonLimits::default(),
        )
        .unwrap();
        let args: Vec<_> = doc.root().unwrap().elements().collect();
        assert_eq!(elements(args[0], true), Some((1_048_576, 1)));
        assert_eq!(elements(args[1], true), Some((16, 1)));
        assert_eq!(elements(args[2], false), Some((0, 0)));
        assert_eq!(elements(args[2], true), Some((1, 1)));
        assert_eq!(elements(args[3], true), Some((5, 2)));
    }

    #[test]
    fn nccl_kernel_names_give_their_algorithm() {
        let name = |k: &str| ALGORITHMS[usize::from(nccl_algorithm(k))];
        assert_eq!(
            name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"),
            "ring"
        );
        assert_eq!(name("ncclDevKernel_AllReduce_Sum_f32_TREE_LL"), "tree");
        assert_eq!(
            name("ncclDevKernel_AllReduce_Sum_bf16_NVLS_TREE_SIMPLE"),
            "nvls_tree"
        );
        assert_eq!(name("ncclDevKernel_AllGather_NVLS_SIMPLE"), "nvls");
        assert_eq!(
            name("ncclDevKernel_AllReduce_Sum_f32_COLLNET_DIRECT_SIMPLE"),
            "collnet_direct"
        );
        assert_eq!(
            name("ncclDevKernel_ReduceScatter_Sum_f32_PAT_SIMPLE"),
            "pat"
        );
        assert_eq!(
            name("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"),
            ""
        );
        assert_eq!(name("ncclDevKernel_Generic"), "");
    }
}
