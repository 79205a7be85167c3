package rendertest

import "github.com/nats-operator/nats-operator/pkg/render"

// The fixture passwords of the controller's system user and their bcrypt
// hashes, computed once (cost 4, so clients authenticate fast) and fixed, so
// golden files stay byte-for-byte stable.
const (
	SystemUserPassword        = "system-user-password"
	SystemUserPasswordHash    = "$2a$04$xzivVL39F0xHHy1I7kfIWuvsgwigY/2F4ExC0GNv7oReP6F1ljkDG"
	RotatedSystemUserPassword = "rotated-system-user-password"
	RotatedSystemUserHash     = "$2a$04$sKS7Y.bK56DxYqBbWCPhzO1kzGkUn2iSSU0LNPd6qYYtMEeXxG4FO"
)

// SystemUser is the controller's system user with SystemUserPassword.
func SystemUser() *render.SystemUser {
	return &render.SystemUser{Name: render.SystemUserName, PasswordHash: SystemUserPasswordHash}
}

// RotatedSystemUser is the same user after a password rotation
// (RotatedSystemUserPassword).
func RotatedSystemUser() *render.SystemUser {
	return &render.SystemUser{Name: render.SystemUserName, PasswordHash: RotatedSystemUserHash}
}
