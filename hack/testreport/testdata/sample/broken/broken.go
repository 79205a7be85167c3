package broken

func Broken() int { return undefinedName }
