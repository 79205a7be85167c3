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

// The fixture nkey of the controller's system user (a user seed made once
// and fixed, so golden files stay stable) and its public key.
const (
	SystemUserSeed = "SUAKXWOCYQII5A4RL2VW6BDH7MPCZSN4WY2SC5DIMYSTJFHZVNJCWJXIZ4"
	SystemUserNKey = "UAKXYLRTWQP5FNTTE5EHTWB5AD4YTUDXON3OABK3L367P2DRSNNEIETY"
)

// NKeySystemUser is the controller's system user as an nkey user
// (SystemUserSeed).
func NKeySystemUser() *render.SystemUser {
	return &render.SystemUser{Name: render.SystemUserName, PasswordHash: SystemUserPasswordHash, NKey: SystemUserNKey}
}
