//! Certificates made with openssl: the self-signed serving certificate used when none is given.

use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::x509::extension::{BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName};
use openssl::x509::{X509Builder, X509NameBuilder, X509};

/// A certificate and its private key.
pub struct KeyPair {
    /// The certificate.
    pub cert: X509,
    /// Its private key.
    pub key: PKey<Private>,
}

fn new_key() -> Result<PKey<Private>, openssl::error::ErrorStack> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
    PKey::from_ec_key(EcKey::generate(&group)?)
}

fn builder(cn: &str, key: &PKey<Private>, days: u32) -> Result<X509Builder, openssl::error::ErrorStack> {
    let mut name = X509NameBuilder::new()?;
    name.append_entry_by_nid(Nid::COMMONNAME, cn)?;
    let name = name.build();
    let mut b = X509Builder::new()?;
    b.set_version(2)?;
    let mut serial = BigNum::new()?;
    serial.rand(127, MsbOption::MAYBE_ZERO, false)?;
    let serial = serial.to_asn1_integer()?;
    b.set_serial_number(&serial)?;
    b.set_subject_name(&name)?;
    b.set_issuer_name(&name)?;
    b.set_pubkey(key)?;
    // Backdated an hour so a slightly slow clock elsewhere still accepts it.
    let (not_before, not_after) = (Asn1Time::from_unix(now_unix() - 3600)?, Asn1Time::days_from_now(days)?);
    b.set_not_before(&not_before)?;
    b.set_not_after(&not_after)?;
    Ok(b)
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// A self-signed serving certificate for `dns_names` (and 127.0.0.1), valid for a year.
pub fn self_signed_serving(cn: &str, dns_names: &[&str]) -> Result<KeyPair, openssl::error::ErrorStack> {
    let mut names = dns_names.to_vec();
    names.push("127.0.0.1");
    let key = new_key()?;
    let mut b = serving_builder(cn, &names, &key, 365)?;
    b.sign(&key, MessageDigest::sha256())?;
    Ok(KeyPair { cert: b.build(), key })
}

/// A serving certificate for `names` (DNS names or IP addresses) signed by `ca`.
pub fn signed_serving(
    cn: &str,
    names: &[&str],
    ca: &KeyPair,
    days: u32,
) -> Result<KeyPair, openssl::error::ErrorStack> {
    let key = new_key()?;
    let mut b = serving_builder(cn, names, &key, days)?;
    b.set_issuer_name(ca.cert.subject_name())?;
    b.sign(&ca.key, MessageDigest::sha256())?;
    Ok(KeyPair { cert: b.build(), key })
}

fn serving_builder(
    cn: &str,
    names: &[&str],
    key: &PKey<Private>,
    days: u32,
) -> Result<X509Builder, openssl::error::ErrorStack> {
    let mut b = builder(cn, key, days)?;
    let mut san = SubjectAlternativeName::new();
    for n in names {
        if n.parse::<std::net::IpAddr>().is_ok() {
            san.ip(n);
        } else {
            san.dns(n);
        }
    }
    let san = san.build(&b.x509v3_context(None, None))?;
    b.append_extension(san)?;
    b.append_extension(KeyUsage::new().critical().digital_signature().key_encipherment().build()?)?;
    b.append_extension(ExtendedKeyUsage::new().server_auth().build()?)?;
    Ok(b)
}

/// A CA certificate named `cn`, valid for `days`.
pub fn ca(cn: &str, days: u32) -> Result<KeyPair, openssl::error::ErrorStack> {
    let key = new_key()?;
    let mut b = builder(cn, &key, days)?;
    b.append_extension(BasicConstraints::new().critical().ca().build()?)?;
    b.append_extension(KeyUsage::new().critical().key_cert_sign().crl_sign().build()?)?;
    b.sign(&key, MessageDigest::sha256())?;
    Ok(KeyPair { cert: b.build(), key })
}

#[cfg(test)]
pub(crate) mod testing {
    //! A throw-away CA and the leaf certificates it signs, for tests.
    use super::*;

    /// A CA certificate named `cn` and its key.
    pub fn ca(cn: &str) -> (X509, PKey<Private>) {
        let kp = super::ca(cn, 1).unwrap();
        (kp.cert, kp.key)
    }

    /// A client certificate with CN `cn` and O `orgs`, signed by `ca`.
    pub fn leaf(ca: &X509, ca_key: &PKey<Private>, cn: &str, orgs: &[&str]) -> X509 {
        let key = new_key().unwrap();
        let mut name = X509NameBuilder::new().unwrap();
        for o in orgs {
            name.append_entry_by_nid(Nid::ORGANIZATIONNAME, o).unwrap();
        }
        name.append_entry_by_nid(Nid::COMMONNAME, cn).unwrap();
        let mut b = builder(cn, &key, 1).unwrap();
        b.set_subject_name(&name.build()).unwrap();
        b.set_issuer_name(ca.subject_name()).unwrap();
        b.append_extension(ExtendedKeyUsage::new().client_auth().build().unwrap()).unwrap();
        b.sign(ca_key, MessageDigest::sha256()).unwrap();
        b.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_certificate_names_the_service() {
        let kp =
            self_signed_serving("hns-apiserver", &["hns-apiserver.hns-system.svc", "localhost"]).unwrap();
        let sans: Vec<String> = kp
            .cert
            .subject_alt_names()
            .unwrap()
            .iter()
            .filter_map(|n| n.dnsname().map(str::to_string))
            .collect();
        assert_eq!(sans, ["hns-apiserver.hns-system.svc", "localhost"]);
        assert!(kp.cert.public_key().unwrap().public_eq(&kp.key));
    }
}
