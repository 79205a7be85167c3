// Package docs holds tests only: they check that README.md and the files
// under docs/ say what the repository holds, so a renamed file, a new
// status reason or a new tested package cannot leave them behind:
//   - every repository path they name (a Markdown link, a path in
//     backticks, a file path in the text) exists, and every link to a
//     heading of a Markdown file finds that heading;
//   - every Go test they name (TestRollingUpgradeUnderLoad, FuzzPlan) is
//     defined by some _test.go file;
//   - every Reason constant of pkg/apis is listed in README.md: those of
//     NatsBackup and NatsRestore (pkg/apis/cluster/v1beta1/backup_types.go)
//     under "Backups and restores", every other under "Reading the status";
//   - README.md's table of the tests ("The tests, and what each package
//     proves") names every package under pkg/ and test/ that has tests, and
//     nothing else.
//
// The controller's flags are checked against the README by
// cmd/nats-operator's tests, the hold list by pkg/rollout's, and
// docs/api.md against the CRDs by hack/apidocs's.
package docs
