// Package natsapi holds the wire shapes that both the reads (pkg/observe)
// and the actions (pkg/act) decode from NATS replies: today the error of a
// $SYS or JetStream API reply. It has no behaviour beyond formatting, so
// neither side imports the other.
package natsapi
