//! What the simulated server checks before a command runs, as CloudStack does for every
//! command: `ApiServer.checkCharacterInkParams` (control characters in any value) and
//! `ParamProcessWorker.processParameters` (each declared `@Parameter`: required, empty,
//! type, and the `length` of a `STRING`, 255 when not declared).
//!
//! The declarations below are the command classes' `@Parameter`s (API name, Java field name,
//! type, length, required), inherited ones included, read from apache/cloudstack:
//! `api/src/main/java/org/apache/cloudstack/api/BaseListCmd.java` (and the other `BaseList*Cmd`),
//! `BaseAsyncCmd.java`, `command/admin/resource/ListAlertsCmd.java`, `ArchiveAlertsCmd.java`,
//! `DeleteAlertsCmd.java`, `command/admin/alert/GenerateAlertCmd.java`,
//! `command/admin/annotation/{AddAnnotationCmd,ListAnnotationsCmd,RemoveAnnotationCmd}.java`,
//! `command/user/job/QueryAsyncJobResultCmd.java`, `command/user/vm/ListVMsCmd.java` (with
//! `ListVMsCmdByAdmin`), `command/user/network/ListNetworksCmd.java` and the kubernetes-service
//! plugin's `ListKubernetesClustersCmd.java`. Only parameters the simulator or its callers use
//! are declared; unknown names are ignored, as the server ignores them.
//!
//! Written from CloudStack's behaviour, independently of the client under test.

use std::collections::BTreeMap;

use super::query::{ApiError, CS_INVALID_PARAMETER, CS_SERVER_API};

/// A `CommandType`, as far as the checks here tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `STRING` with its `length`.
    Str(usize),
    /// `UUID`, `LIST`, `BOOLEAN`, `INTEGER`, `DATE`, `MAP`: checked by the handlers.
    Other,
    /// `LONG` and `SHORT`: `Long.valueOf` / `Short.valueOf`, so an empty or non-numeric value
    /// is refused here.
    Whole,
}

#[derive(Debug, Clone, Copy)]
struct Declared {
    name: &'static str,
    /// The Java field: what a length error names.
    field: &'static str,
    kind: Kind,
    required: bool,
}

const fn p(name: &'static str, field: &'static str, kind: Kind) -> Declared {
    Declared {
        name,
        field,
        kind,
        required: false,
    }
}

const fn required(name: &'static str, field: &'static str, kind: Kind) -> Declared {
    Declared {
        name,
        field,
        kind,
        required: true,
    }
}

/// `@Parameter.length` when none is declared.
const DEFAULT_LENGTH: usize = 255;
const S: Kind = Kind::Str(DEFAULT_LENGTH);
const O: Kind = Kind::Other;

/// `BaseListCmd`.
const LIST: &[Declared] = &[
    p("keyword", "keyword", S),
    p("page", "page", O),
    p("pagesize", "pageSize", O),
];

/// `BaseListProjectAndAccountResourcesCmd` and its bases above `BaseListCmd`.
const LIST_OWNED: &[Declared] = &[
    p("listall", "listAll", O),
    p("domainid", "domainId", O),
    p("isrecursive", "recursive", O),
    p("account", "accountName", S),
    p("projectid", "projectId", O),
];

/// `BaseAsyncCmd`.
const ASYNC: &[Declared] = &[
    p("starteventid", "startEventId", Kind::Whole),
    p("customjobid", "injectedJobId", S),
];

/// The command's own parameters, and which base-class groups it inherits.
fn declared(command: &str) -> (&'static [Declared], &'static [&'static [Declared]]) {
    match command {
        "listKubernetesClusters" => (LIST_KUBERNETES_CLUSTERS, &[LIST, LIST_OWNED]),
        "listVirtualMachines" => (LIST_VIRTUAL_MACHINES, &[LIST, LIST_OWNED]),
        "listNetworks" => (LIST_NETWORKS, &[LIST, LIST_OWNED]),
        "listAlerts" => (LIST_ALERTS, &[LIST]),
        "archiveAlerts" | "deleteAlerts" => (ARCHIVE_ALERTS, &[]),
        "generateAlert" => (GENERATE_ALERT, &[ASYNC]),
        "queryAsyncJobResult" => (QUERY_ASYNC_JOB_RESULT, &[]),
        "addAnnotation" => (ADD_ANNOTATION, &[]),
        "listAnnotations" => (LIST_ANNOTATIONS, &[LIST]),
        "removeAnnotation" => (REMOVE_ANNOTATION, &[]),
        "getUser" => (GET_USER, &[]),
        "listConfigurations" => (LIST_CONFIGURATIONS, &[LIST]),
        // `ListAlertTypesCmd` is a `BaseCmd` (4.19.1 on): no parameter of its own, no paging.
        "listAlertTypes" => (&[], &[]),
        _ => (&[], &[]),
    }
}

/// `GetUserCmd`.
const GET_USER: &[Declared] = &[required("userapikey", "apiKey", S)];
const LIST_KUBERNETES_CLUSTERS: &[Declared] = &[
    p("id", "id", O),
    p("state", "state", S),
    p("name", "name", S),
    p("clustertype", "clusterType", S),
];
const LIST_VIRTUAL_MACHINES: &[Declared] = &[
    p("id", "id", O),
    p("ids", "ids", O),
    p("name", "name", S),
    p("state", "state", S),
    p("zoneid", "zoneId", O),
    p("networkid", "networkId", O),
    p("hypervisor", "hypervisor", S),
    p("details", "viewDetails", O),
    p("keypair", "keypair", S),
    p("arch", "arch", S),
];
const LIST_NETWORKS: &[Declared] = &[
    p("id", "id", O),
    p("name", "name", S),
    p("zoneid", "zoneId", O),
    p("type", "guestIpType", S),
    p("acltype", "aclType", S),
    p("traffictype", "trafficType", S),
    p("networkfilter", "networkFilter", S),
];
/// `ListCfgsByCmd` (a `BaseListCmd`, the same on 4.16 to `main` for these; `group`,
/// `subgroup`, `parent` since 4.18).
const LIST_CONFIGURATIONS: &[Declared] = &[
    p("name", "configName", S),
    p("category", "category", S),
    p("zoneid", "zoneId", O),
    p("group", "groupName", S),
];
const LIST_ALERTS: &[Declared] = &[p("id", "id", O), p("type", "type", S), p("name", "name", S)];
const ARCHIVE_ALERTS: &[Declared] = &[
    p("ids", "ids", O),
    p("enddate", "endDate", O),
    p("startdate", "startDate", O),
    p("type", "type", S),
];
const GENERATE_ALERT: &[Declared] = &[
    required("type", "type", Kind::Whole),
    required("name", "name", S),
    required("description", "description", Kind::Str(999)),
    p("zoneid", "zoneId", O),
    p("podid", "podId", O),
];
const QUERY_ASYNC_JOB_RESULT: &[Declared] = &[required("jobid", "id", O)];
const ADD_ANNOTATION: &[Declared] = &[
    p("annotation", "annotation", S),
    p("entitytype", "entityType", S),
    p("entityid", "entityUuid", S),
    p("adminsonly", "adminsOnly", O),
];
const LIST_ANNOTATIONS: &[Declared] = &[
    p("id", "uuid", S),
    p("entitytype", "entityType", S),
    p("entityid", "entityUuid", S),
    p("userid", "userUuid", S),
    p("annotationfilter", "annotationFilter", S),
];
const REMOVE_ANNOTATION: &[Declared] = &[required("id", "uuid", S)];

/// The refused characters of `ApiServer` (`[\000-\011\013-\014\016-\037\177]`): ASCII control
/// characters but LF and CR.
fn refused_char(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{9}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}')
}

/// Java's `String.length()`: UTF-16 code units.
fn java_length(s: &str) -> usize {
    s.encode_utf16().count()
}

/// `ApiServer.checkCharacterInkParams`: every value (authentication parameters included) of a
/// request whose signature was verified, named as sent. Only `activationrule` is exempt.
pub fn check_characters(params: &BTreeMap<String, String>) -> Result<(), ApiError> {
    for (name, value) in params {
        if name != "activationrule" && value.chars().any(refused_char) {
            return Err(ApiError::param(format!(
                "Received value containing illegal ASCII non-printable characters for parameter {name}"
            )));
        }
    }
    Ok(())
}

/// `ParamProcessWorker.processParameters` for the declared parameters of `command`; `params`
/// has lower-cased names.
pub fn check_declared(command: &str, params: &BTreeMap<String, String>) -> Result<(), ApiError> {
    let cmd = command.to_lowercase();
    let (own, bases) = declared(command);
    let all = own.iter().chain(bases.iter().flat_map(|b| b.iter()));
    for d in all {
        let Some(value) = params.get(d.name) else {
            if d.required {
                return Err(ApiError::param(format!(
                    "Unable to execute API command {cmd} due to missing parameter {}",
                    d.name
                )));
            }
            continue;
        };
        // `validateNonEmptyString`, outside the catch that wraps the other errors.
        if d.required && value.is_empty() {
            return Err(ApiError {
                code: 431,
                cs_code: Some(CS_INVALID_PARAMETER),
                text: format!("Invalid value provided for API arg: {}", d.name),
            });
        }
        match d.kind {
            Kind::Str(max) if java_length(value) > max => {
                return Err(ApiError::param(format!(
                    "Unable to execute API command {cmd} due to invalid value. Value greater than max allowed length {max} for param: {}",
                    d.field
                )));
            }
            Kind::Whole if value.trim() != value || value.parse::<i64>().is_err() => {
                return Err(ApiError {
                    code: 431,
                    cs_code: Some(CS_SERVER_API),
                    text: format!(
                        "Unable to execute API command {cmd} due to invalid value {value} for parameter {}",
                        d.name
                    ),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn string_lengths_are_utf16_units_against_the_declared_length() {
        let ok = "a".repeat(255);
        assert_eq!(
            check_declared("addAnnotation", &params(&[("annotation", &ok)])),
            Ok(())
        );
        let emoji = format!("{}😀", "a".repeat(254));
        assert_eq!(emoji.chars().count(), 255);
        let err = check_declared("addAnnotation", &params(&[("annotation", &emoji)])).unwrap_err();
        assert_eq!(
            (err.code, err.cs_code, err.text.as_str()),
            (
                431,
                Some(9999),
                "Unable to execute API command addannotation due to invalid value. Value greater than max allowed length 255 for param: annotation"
            )
        );
        let long = "d".repeat(1000);
        let err = check_declared(
            "generateAlert",
            &params(&[("type", "3000"), ("name", "n"), ("description", &long)]),
        )
        .unwrap_err();
        assert!(
            err.text
                .ends_with("max allowed length 999 for param: description")
        );
        let err = check_declared(
            "listAnnotations",
            &params(&[("entityid", &ok), ("id", &long)]),
        )
        .unwrap_err();
        assert!(err.text.ends_with("for param: uuid"), "{}", err.text);
        let err = check_declared("listAlerts", &params(&[("keyword", &long)])).unwrap_err();
        assert_eq!(
            err.text,
            "Unable to execute API command listalerts due to invalid value. Value greater than max allowed length 255 for param: keyword"
        );
    }

    #[test]
    fn required_parameters_missing_or_empty() {
        let err = check_declared("removeAnnotation", &params(&[])).unwrap_err();
        assert_eq!(
            (err.code, err.cs_code, err.text.as_str()),
            (
                431,
                Some(9999),
                "Unable to execute API command removeannotation due to missing parameter id"
            )
        );
        let err = check_declared("removeAnnotation", &params(&[("id", "")])).unwrap_err();
        assert_eq!(
            (err.code, err.cs_code, err.text.as_str()),
            (431, Some(4350), "Invalid value provided for API arg: id")
        );
        let err = check_declared(
            "generateAlert",
            &params(&[("type", "x"), ("name", "n"), ("description", "d")]),
        )
        .unwrap_err();
        assert_eq!(
            err.text,
            "Unable to execute API command generatealert due to invalid value x for parameter type"
        );
        // An optional empty STRING is an empty string, not an error.
        assert_eq!(
            check_declared("addAnnotation", &params(&[("annotation", "")])),
            Ok(())
        );
    }

    #[test]
    fn control_characters_but_lf_and_cr_are_refused_in_any_value() {
        assert_eq!(
            check_characters(&params(&[("annotation", "a\nb\rc")])),
            Ok(())
        );
        for bad in [
            "a\tb",
            "\u{0}",
            "\u{1b}[2J",
            "\u{7f}",
            "\u{b}",
            "\u{c}",
            "\u{1f}",
        ] {
            let err =
                check_characters(&params(&[("apikey", "k"), ("description", bad)])).unwrap_err();
            assert_eq!(
                (err.code, err.cs_code, err.text.as_str()),
                (
                    431,
                    Some(9999),
                    "Received value containing illegal ASCII non-printable characters for parameter description"
                )
            );
        }
        assert_eq!(
            check_characters(&params(&[("activationrule", "\t")])),
            Ok(())
        );
        assert_eq!(
            check_characters(&params(&[("annotation", "\u{85}é😀")])),
            Ok(())
        );
    }
}
