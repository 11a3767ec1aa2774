//! Kubernetes' IP and CIDR libraries.
//!
//! IP: `ip(<string>)`, `isIP`, `ip.isCanonical`, `string(<ip>)`, and on an
//! IP `family`, `isUnspecified`, `isLoopback`, `isLinkLocalMulticast`,
//! `isLinkLocalUnicast`, `isGlobalUnicast`.
//!
//! CIDR: `cidr(<string>)`, `isCIDR`, `string(<cidr>)`, and on a CIDR
//! `containsIP` (an IP or a string), `containsCIDR` (a CIDR or a string),
//! `ip`, `masked`, `prefixLength`.
//!
//! As in Kubernetes (Go's `netip`), an address with a zone (`fe80::1%eth0`)
//! and an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) are refused, and so
//! are leading zeros in IPv4 octets and in prefix lengths.

use std::fmt;
use std::net::IpAddr;

use cel::common::types::{Type, STRING_TYPE};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::native::{err, native, opaque, string, wrap};

const IP_TYPE_NAME: &str = "net.IP";
const CIDR_TYPE_NAME: &str = "net.CIDR";

fn ip_type() -> Type {
    Type::new_opaque_type(IP_TYPE_NAME)
}

fn cidr_type() -> Type {
    Type::new_opaque_type(CIDR_TYPE_NAME)
}

/// An IP address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ip(IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE_NAME
    }
}

impl fmt::Display for Ip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A network: an address (not necessarily masked) and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE_NAME
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn parse_ip(s: &str) -> Result<IpAddr, String> {
    if s.contains('%') {
        return Err(format!("IP address {s:?} with zone value is not allowed"));
    }
    let addr: IpAddr = s
        .parse()
        .map_err(|_| format!("IP Address {s:?} parse error during conversion from string"))?;
    if let IpAddr::V6(v6) = addr {
        if v6.to_ipv4_mapped().is_some() {
            return Err(format!("IPv4-mapped IPv6 address {s:?} is not allowed"));
        }
    }
    Ok(addr)
}

fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let bad = || format!("network address {s:?} parse error during conversion from string");
    let (addr, bits) = s.split_once('/').ok_or_else(bad)?;
    let addr = parse_ip(addr)?;
    if bits.is_empty()
        || !bits.bytes().all(|b| b.is_ascii_digit())
        || bits.len() > 1 && bits.starts_with('0')
    {
        return Err(bad());
    }
    let prefix: u8 = bits.parse().map_err(|_| bad())?;
    if prefix > bit_len(addr) {
        return Err(bad());
    }
    Ok(Cidr { addr, prefix })
}

fn bit_len(addr: IpAddr) -> u8 {
    if addr.is_ipv4() {
        32
    } else {
        128
    }
}

/// The address as a 128-bit number, and its width.
fn bits(addr: IpAddr) -> (u128, u8) {
    match addr {
        IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
        IpAddr::V6(a) => (u128::from(a), 128),
    }
}

fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    let (n, width) = bits(addr);
    let keep = if prefix == 0 {
        0
    } else {
        (!0u128) << (width - prefix)
    };
    let masked = n
        & keep
        & if width == 32 {
            u128::from(u32::MAX)
        } else {
            !0
        };
    match addr {
        IpAddr::V4(_) => IpAddr::V4((masked as u32).into()),
        IpAddr::V6(_) => IpAddr::V6(masked.into()),
    }
}

impl Cidr {
    fn contains(&self, addr: IpAddr) -> bool {
        addr.is_ipv4() == self.addr.is_ipv4()
            && mask(addr, self.prefix) == mask(self.addr, self.prefix)
    }
}

fn is_link_local_multicast(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.octets()[0] == 0xff && v6.octets()[1] & 0x0f == 0x02,
    }
}

fn is_link_local_unicast(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn is_global_unicast(a: IpAddr) -> bool {
    let broadcast = matches!(a, IpAddr::V4(v4) if v4.is_broadcast());
    !(a.is_unspecified()
        || a.is_loopback()
        || a.is_multicast()
        || is_link_local_unicast(a)
        || broadcast)
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("ip", "string_to_ip", vec![STRING_TYPE], native!(ip))?;
    env.add_overload("isIP", "is_ip_string", vec![STRING_TYPE], native!(is_ip))?;
    env.add_overload(
        "ip.isCanonical",
        "ip_is_canonical",
        vec![STRING_TYPE],
        native!(is_canonical),
    )?;
    env.add_overload(
        "string",
        "ip_to_string",
        vec![ip_type()],
        native!(to_string),
    )?;
    env.add_overload(
        "string",
        "cidr_to_string",
        vec![cidr_type()],
        native!(to_string),
    )?;
    let predicates = [
        ("family", native!(family)),
        ("isUnspecified", native!(is_unspecified)),
        ("isLoopback", native!(is_loopback)),
        ("isLinkLocalMulticast", native!(link_local_multicast)),
        ("isLinkLocalUnicast", native!(link_local_unicast)),
        ("isGlobalUnicast", native!(global_unicast)),
    ];
    for (name, f) in predicates {
        env.add_member_overload(name, &format!("ip_{name}"), ip_type(), vec![], f)?;
    }
    env.add_overload("cidr", "string_to_cidr", vec![STRING_TYPE], native!(cidr))?;
    env.add_overload(
        "isCIDR",
        "is_cidr_string",
        vec![STRING_TYPE],
        native!(is_cidr),
    )?;
    let c = cidr_type;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip",
        c(),
        vec![ip_type()],
        native!(contains_ip),
    )?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_string",
        c(),
        vec![STRING_TYPE],
        native!(contains_ip),
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr",
        c(),
        vec![c()],
        native!(contains_cidr),
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        c(),
        vec![STRING_TYPE],
        native!(contains_cidr),
    )?;
    env.add_member_overload("ip", "cidr_ip", c(), vec![], native!(cidr_ip))?;
    env.add_member_overload("masked", "cidr_masked", c(), vec![], native!(masked))?;
    env.add_member_overload(
        "prefixLength",
        "cidr_prefix_length",
        c(),
        vec![],
        native!(prefix_length),
    )?;
    Ok(())
}

fn addr_of(function: &str, v: &Value) -> Result<IpAddr, ExecutionError> {
    match v {
        Value::String(s) => parse_ip(s).map_err(|e| err(function, e)),
        other => Ok(opaque::<Ip>(function, other)?.0),
    }
}

fn cidr_of(function: &str, v: &Value) -> Result<Cidr, ExecutionError> {
    match v {
        Value::String(s) => parse_cidr(s).map_err(|e| err(function, e)),
        other => Ok(*opaque::<Cidr>(function, other)?),
    }
}

fn ip(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(wrap(Ip(addr_of("ip", &args[0])?)))
}

fn is_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse_ip(string("isIP", &args[0])?).is_ok()))
}

fn is_canonical(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string("ip.isCanonical", &args[0])?;
    let addr = parse_ip(s).map_err(|e| err("ip.isCanonical", e))?;
    Ok(Value::Bool(addr.to_string() == s))
}

fn to_string(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = match &args[0] {
        Value::Opaque(o) => crate::library::opaque_to_string(o.as_ref()),
        _ => None,
    };
    s.map(|s| Value::String(s.into()))
        .ok_or_else(|| err("string", "unexpected argument"))
}

fn the_ip(args: &[Value]) -> Result<IpAddr, ExecutionError> {
    Ok(opaque::<Ip>("ip", &args[0])?.0)
}

fn family(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(if the_ip(args)?.is_ipv4() { 4 } else { 6 }))
}

fn is_unspecified(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(the_ip(args)?.is_unspecified()))
}

fn is_loopback(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(the_ip(args)?.is_loopback()))
}

fn link_local_multicast(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(is_link_local_multicast(the_ip(args)?)))
}

fn link_local_unicast(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(is_link_local_unicast(the_ip(args)?)))
}

fn global_unicast(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(is_global_unicast(the_ip(args)?)))
}

fn cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(wrap(cidr_of("cidr", &args[0])?))
}

fn is_cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse_cidr(string("isCIDR", &args[0])?).is_ok()))
}

fn contains_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    let net = cidr_of("containsIP", &args[0])?;
    Ok(Value::Bool(net.contains(addr_of("containsIP", &args[1])?)))
}

fn contains_cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    let net = cidr_of("containsCIDR", &args[0])?;
    let other = cidr_of("containsCIDR", &args[1])?;
    Ok(Value::Bool(
        other.prefix >= net.prefix && net.contains(other.addr),
    ))
}

fn cidr_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(wrap(Ip(cidr_of("ip", &args[0])?.addr)))
}

fn masked(args: &[Value]) -> Result<Value, ExecutionError> {
    let net = cidr_of("masked", &args[0])?;
    Ok(wrap(Cidr {
        addr: mask(net.addr, net.prefix),
        prefix: net.prefix,
    }))
}

fn prefix_length(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(i64::from(
        cidr_of("prefixLength", &args[0])?.prefix,
    )))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::{assert_error, assert_true};

    #[test]
    fn ip_examples() {
        assert_true(&[
            "isIP('127.0.0.1')",
            "isIP('::1')",
            "!isIP('127.0.0.256')",
            "!isIP('::ffff:127.0.0.1')",
            "!isIP('fe80::1%eth0')",
            "!isIP('01.2.3.4')",
            "ip('127.0.0.1') == ip('127.0.0.1')",
            "ip('127.0.0.1') != ip('127.0.0.2')",
            "ip('127.0.0.1').family() == 4",
            "ip('::1').family() == 6",
            "ip.isCanonical('127.0.0.1')",
            "ip.isCanonical('2001:db8::abcd')",
            "!ip.isCanonical('2001:DB8::ABCD')",
            "!ip.isCanonical('2001:db8:0:0:0:0:0:abcd')",
            "string(ip('2001:db8:0:0:0:0:0:abcd')) == '2001:db8::abcd'",
            "ip('0.0.0.0').isUnspecified()",
            "ip('::').isUnspecified()",
            "!ip('127.0.0.1').isUnspecified()",
            "ip('127.0.0.1').isLoopback()",
            "ip('::1').isLoopback()",
            "!ip('192.168.0.1').isLoopback()",
            "ip('224.0.0.1').isLinkLocalMulticast()",
            "!ip('224.0.1.1').isLinkLocalMulticast()",
            "ip('ff02::1').isLinkLocalMulticast()",
            "!ip('fd00::1').isLinkLocalMulticast()",
            "ip('169.254.169.254').isLinkLocalUnicast()",
            "!ip('192.168.0.1').isLinkLocalUnicast()",
            "ip('fe80::1').isLinkLocalUnicast()",
            "!ip('fd80::1').isLinkLocalUnicast()",
            "ip('192.168.0.1').isGlobalUnicast()",
            "!ip('255.255.255.255').isGlobalUnicast()",
            "ip('2001:db8::abcd').isGlobalUnicast()",
            "!ip('ff00::1').isGlobalUnicast()",
            "type(ip('192.168.0.1')) == net.IP",
            "type(cidr('192.168.0.0/24')) == net.CIDR",
        ]);
        assert_error(&[
            ("ip('::ffff:1.2.3.4')", "IPv4-mapped IPv6 address"),
            ("ip('x')", "parse error during conversion from string"),
            (
                "ip('192.168.0.1.0')",
                "IP Address \"192.168.0.1.0\" parse error during conversion from string",
            ),
        ]);
    }

    #[test]
    fn cidr_examples() {
        assert_true(&[
            "isCIDR('192.168.0.0/24')",
            "isCIDR('::1/128')",
            "!isCIDR('192.168.0.0/33')",
            "!isCIDR('192.168.0.0')",
            "!isCIDR('192.168.0.0/024')",
            "!isCIDR('::ffff:1.2.3.4/120')",
            "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))",
            "!cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))",
            "cidr('192.168.0.0/24').containsIP('192.168.0.1')",
            "!cidr('192.168.0.0/24').containsIP('::1')",
            "cidr('::/0').containsIP('2001:db8::1')",
            "cidr('0.0.0.0/0').containsIP('1.2.3.4')",
            "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25'))",
            "cidr('192.168.0.0/24').containsCIDR('192.168.0.128/25')",
            "!cidr('192.168.0.0/24').containsCIDR('192.168.0.0/23')",
            "cidr('192.168.0.0/24').ip() == ip('192.168.0.0')",
            "cidr('192.168.0.1/24').ip() == ip('192.168.0.1')",
            "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')",
            "cidr('2001:db8::1/32').masked() == cidr('2001:db8::/32')",
            "cidr('192.168.0.0/24').prefixLength() == 24",
            "string(cidr('::1/128')) == '::1/128'",
            "string(cidr('192.168.0.1/24').masked()) == '192.168.0.0/24'",
        ]);
        assert_error(&[(
            "cidr('1.2.3.4')",
            "parse error during conversion from string",
        )]);
    }
}
