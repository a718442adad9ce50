// Published test vectors for the asymmetric mechanisms (AsymmetricVectorTests.swift).
// Each set was also checked against the OpenSSL 3.0 command line when it was
// written (openssl pkeyutl -derive / -sign -rawin, openssl dgst -verify), so a
// mistyped digit would have shown there, not only in these tests.

/// RFC 8032 §7.4 (Ed448) and §7.5 (Ed448ph), in the RFC's order.
struct Ed448Vector: Sendable {
    let name: String
    let prehash: Bool
    let secretKey: String
    let publicKey: String
    let message: String
    let context: String
    let signature: String
}

/// RFC 7748 X25519/X448: scalar, peer u-coordinate, output (§5.2 and the §6 exchanges).
struct MontgomeryVector: Sendable {
    let scalar: String
    let u: String
    let output: String
}

/// RFC 7027 Appendix A (the same as RFC 8734 Appendix A): brainpool ECDH.
struct BrainpoolVector: Sendable {
    let curve: String
    let dA, xA, yA, dB, xB, yB, z: String
}

/// NIST CAVP FIPS 186-2 ECDSA SigGen.rsp (CAVS 11.2), [P-192] and [P-224]:
/// SHA-1 signatures (r, s) of Msg by the key (Qx, Qy), all valid.
struct ECDSAVector: Sendable {
    let curve: String
    let msg, qx, qy, r, s: String
}

enum AsymmetricVectors {
    static let ed448: [Ed448Vector] = [
        Ed448Vector(
            name: "Blank", prehash: false,
            secretKey: """
            6c82a562cb808d10d632be89c8513ebf6c929f34ddfa8c9f63c9960ef6e348a3528c8a3fcc2f044e39a3fc5b94492f8f
            032e7549a20098f95b
            """,
            publicKey: """
            5fd7449b59b461fd2ce787ec616ad46a1da1342485a70e1f8a0ea75d80e96778edf124769b46c7061bd6783df1e50f6c
            d1fa1abeafe8256180
            """,
            message: "",
            context: "",
            signature: """
            533a37f6bbe457251f023c0d88f976ae2dfb504a843e34d2074fd823d41a591f2b233f034f628281f2fd7a22ddd47d78
            28c59bd0a21bfd3980ff0d2028d4b18a9df63e006c5d1c2d345b925d8dc00b4104852db99ac5c7cdda8530a113a0f4db
            b61149f05a7363268c71d95808ff2e652600
            """),
        Ed448Vector(
            name: "1 octet", prehash: false,
            secretKey: """
            c4eab05d357007c632f3dbb48489924d552b08fe0c353a0d4a1f00acda2c463afbea67c5e8d2877c5e3bc397a659949e
            f8021e954e0a12274e
            """,
            publicKey: """
            43ba28f430cdff456ae531545f7ecd0ac834a55d9358c0372bfa0c6c6798c0866aea01eb00742802b8438ea4cb82169c
            235160627b4c3a9480
            """,
            message: "03",
            context: "",
            signature: """
            26b8f91727bd62897af15e41eb43c377efb9c610d48f2335cb0bd0087810f4352541b143c4b981b7e18f62de8ccdf633
            fc1bf037ab7cd779805e0dbcc0aae1cbcee1afb2e027df36bc04dcecbf154336c19f0af7e0a6472905e799f1953d2a0f
            f3348ab21aa4adafd1d234441cf807c03a00
            """),
        Ed448Vector(
            name: "1 octet (with context)", prehash: false,
            secretKey: """
            c4eab05d357007c632f3dbb48489924d552b08fe0c353a0d4a1f00acda2c463afbea67c5e8d2877c5e3bc397a659949e
            f8021e954e0a12274e
            """,
            publicKey: """
            43ba28f430cdff456ae531545f7ecd0ac834a55d9358c0372bfa0c6c6798c0866aea01eb00742802b8438ea4cb82169c
            235160627b4c3a9480
            """,
            message: "03",
            context: "666f6f",
            signature: """
            d4f8f6131770dd46f40867d6fd5d5055de43541f8c5e35abbcd001b32a89f7d2151f7647f11d8ca2ae279fb842d60721
            7fce6e042f6815ea000c85741de5c8da1144a6a1aba7f96de42505d7a7298524fda538fccbbb754f578c1cad10d54d0d
            5428407e85dcbc98a49155c13764e66c3c00
            """),
        Ed448Vector(
            name: "11 octets", prehash: false,
            secretKey: """
            cd23d24f714274e744343237b93290f511f6425f98e64459ff203e8985083ffdf60500553abc0e05cd02184bdb89c4cc
            d67e187951267eb328
            """,
            publicKey: """
            dcea9e78f35a1bf3499a831b10b86c90aac01cd84b67a0109b55a36e9328b1e365fce161d71ce7131a543ea4cb5f7e9f
            1d8b00696447001400
            """,
            message: "0c3e544074ec63b0265e0c",
            context: "",
            signature: """
            1f0a8888ce25e8d458a21130879b840a9089d999aaba039eaf3e3afa090a09d389dba82c4ff2ae8ac5cdfb7c55e94d5d
            961a29fe0109941e00b8dbdeea6d3b051068df7254c0cdc129cbe62db2dc957dbb47b51fd3f213fb8698f064774250a5
            028961c9bf8ffd973fe5d5c206492b140e00
            """),
        Ed448Vector(
            name: "12 octets", prehash: false,
            secretKey: """
            258cdd4ada32ed9c9ff54e63756ae582fb8fab2ac721f2c8e676a72768513d939f63dddb55609133f29adf86ec9929dc
            cb52c1c5fd2ff7e21b
            """,
            publicKey: """
            3ba16da0c6f2cc1f30187740756f5e798d6bc5fc015d7c63cc9510ee3fd44adc24d8e968b6e46e6f94d19b945361726b
            d75e149ef09817f580
            """,
            message: "64a65f3cdedcdd66811e2915",
            context: "",
            signature: """
            7eeeab7c4e50fb799b418ee5e3197ff6bf15d43a14c34389b59dd1a7b1b85b4ae90438aca634bea45e3a2695f1270f07
            fdcdf7c62b8efeaf00b45c2c96ba457eb1a8bf075a3db28e5c24f6b923ed4ad747c3c9e03c7079efb87cb110d3a99861
            e72003cbae6d6b8b827e4e6c143064ff3c00
            """),
        Ed448Vector(
            name: "13 octets", prehash: false,
            secretKey: """
            7ef4e84544236752fbb56b8f31a23a10e42814f5f55ca037cdcc11c64c9a3b2949c1bb60700314611732a6c2fea98eeb
            c0266a11a93970100e
            """,
            publicKey: """
            b3da079b0aa493a5772029f0467baebee5a8112d9d3a22532361da294f7bb3815c5dc59e176b4d9f381ca0938e13c6c0
            7b174be65dfa578e80
            """,
            message: "64a65f3cdedcdd66811e2915e7",
            context: "",
            signature: """
            6a12066f55331b6c22acd5d5bfc5d71228fbda80ae8dec26bdd306743c5027cb4890810c162c027468675ecf645a8317
            6c0d7323a2ccde2d80efe5a1268e8aca1d6fbc194d3f77c44986eb4ab4177919ad8bec33eb47bbb5fc6e28196fd1caf5
            6b4e7e0ba5519234d047155ac727a1053100
            """),
        Ed448Vector(
            name: "64 octets", prehash: false,
            secretKey: """
            d65df341ad13e008567688baedda8e9dcdc17dc024974ea5b4227b6530e339bff21f99e68ca6968f3cca6dfe0fb9f4fa
            b4fa135d5542ea3f01
            """,
            publicKey: """
            df9705f58edbab802c7f8363cfe5560ab1c6132c20a9f1dd163483a26f8ac53a39d6808bf4a1dfbd261b099bb03b3fb5
            0906cb28bd8a081f00
            """,
            message: """
            bd0f6a3747cd561bdddf4640a332461a4a30a12a434cd0bf40d766d9c6d458e5512204a30c17d1f50b5079631f64eb31
            12182da3005835461113718d1a5ef944
            """,
            context: "",
            signature: """
            554bc2480860b49eab8532d2a533b7d578ef473eeb58c98bb2d0e1ce488a98b18dfde9b9b90775e67f47d4a1c3482058
            efc9f40d2ca033a0801b63d45b3b722ef552bad3b4ccb667da350192b61c508cf7b6b5adadc2c8d9a446ef003fb05cba
            5f30e88e36ec2703b349ca229c2670833900
            """),
        Ed448Vector(
            name: "256 octets", prehash: false,
            secretKey: """
            2ec5fe3c17045abdb136a5e6a913e32ab75ae68b53d2fc149b77e504132d37569b7e766ba74a19bd6162343a21c8590a
            a9cebca9014c636df5
            """,
            publicKey: """
            79756f014dcfe2079f5dd9e718be4171e2ef2486a08f25186f6bff43a9936b9bfe12402b08ae65798a3d81e22e9ec80e
            7690862ef3d4ed3a00
            """,
            message: """
            15777532b0bdd0d1389f636c5f6b9ba734c90af572877e2d272dd078aa1e567cfa80e12928bb542330e8409f31745041
            07ecd5efac61ae7504dabe2a602ede89e5cca6257a7c77e27a702b3ae39fc769fc54f2395ae6a1178cab4738e543072f
            c1c177fe71e92e25bf03e4ecb72f47b64d0465aaea4c7fad372536c8ba516a6039c3c2a39f0e4d832be432dfa9a706a6
            e5c7e19f397964ca4258002f7c0541b590316dbc5622b6b2a6fe7a4abffd96105eca76ea7b98816af0748c10df048ce0
            12d901015a51f189f3888145c03650aa23ce894c3bd889e030d565071c59f409a9981b51878fd6fc110624dcbcde0bf7
            a69ccce38fabdf86f3bef6044819de11
            """,
            context: "",
            signature: """
            c650ddbb0601c19ca11439e1640dd931f43c518ea5bea70d3dcde5f4191fe53f00cf966546b72bcc7d58be2b9badef28
            743954e3a44a23f880e8d4f1cfce2d7a61452d26da05896f0a50da66a239a8a188b6d825b3305ad77b73fbac0836ecc6
            0987fd08527c1a8e80d5823e65cafe2a3d00
            """),
        Ed448Vector(
            name: "1023 octets", prehash: false,
            secretKey: """
            872d093780f5d3730df7c212664b37b8a0f24f56810daa8382cd4fa3f77634ec44dc54f1c2ed9bea86fafb7632d8be19
            9ea165f5ad55dd9ce8
            """,
            publicKey: """
            a81b2e8a70a5ac94ffdbcc9badfc3feb0801f258578bb114ad44ece1ec0e799da08effb81c5d685c0c56f64eecaef8cd
            f11cc38737838cf400
            """,
            message: """
            6ddf802e1aae4986935f7f981ba3f0351d6273c0a0c22c9c0e8339168e675412a3debfaf435ed651558007db4384b650
            fcc07e3b586a27a4f7a00ac8a6fec2cd86ae4bf1570c41e6a40c931db27b2faa15a8cedd52cff7362c4e6e23daec0fbc
            3a79b6806e316efcc7b68119bf46bc76a26067a53f296dafdbdc11c77f7777e972660cf4b6a9b369a6665f02e0cc9b6e
            dfad136b4fabe723d2813db3136cfde9b6d044322fee2947952e031b73ab5c603349b307bdc27bc6cb8b8bbd7bd32321
            9b8033a581b59eadebb09b3c4f3d2277d4f0343624acc817804728b25ab797172b4c5c21a22f9c7839d64300232eb66e
            53f31c723fa37fe387c7d3e50bdf9813a30e5bb12cf4cd930c40cfb4e1fc622592a49588794494d56d24ea4b40c89fc0
            596cc9ebb961c8cb10adde976a5d602b1c3f85b9b9a001ed3c6a4d3b1437f52096cd1956d042a597d561a596ecd3d173
            5a8d570ea0ec27225a2c4aaff26306d1526c1af3ca6d9cf5a2c98f47e1c46db9a33234cfd4d81f2c98538a09ebe76998
            d0d8fd25997c7d255c6d66ece6fa56f11144950f027795e653008f4bd7ca2dee85d8e90f3dc315130ce2a00375a318c7
            c3d97be2c8ce5b6db41a6254ff264fa6155baee3b0773c0f497c573f19bb4f4240281f0b1f4f7be857a4e59d416c06b4
            c50fa09e1810ddc6b1467baeac5a3668d11b6ecaa901440016f389f80acc4db977025e7f5924388c7e340a732e554440
            e76570f8dd71b7d640b3450d1fd5f0410a18f9a3494f707c717b79b4bf75c98400b096b21653b5d217cf3565c9597456
            f70703497a078763829bc01bb1cbc8fa04eadc9a6e3f6699587a9e75c94e5bab0036e0b2e711392cff0047d0d6b05bd2
            a588bc109718954259f1d86678a579a3120f19cfb2963f177aeb70f2d4844826262e51b80271272068ef5b3856fa8535
            aa2a88b2d41f2a0e2fda7624c2850272ac4a2f561f8f2f7a318bfd5caf9696149e4ac824ad3460538fdc25421beec2cc
            6818162d06bbed0c40a387192349db67a118bada6cd5ab0140ee273204f628aad1c135f770279a651e24d8c14d75a605
            9d76b96a6fd857def5e0b354b27ab937a5815d16b5fae407ff18222c6d1ed263be68c95f32d908bd895cd76207ae7264
            87567f9a67dad79abec316f683b17f2d02bf07e0ac8b5bc6162cf94697b3c27cd1fea49b27f23ba2901871962506520c
            392da8b6ad0d99f7013fbc06c2c17a569500c8a7696481c1cd33e9b14e40b82e79a5f5db82571ba97bae3ad3e0479515
            bb0e2b0f3bfcd1fd33034efc6245eddd7ee2086ddae2600d8ca73e214e8c2b0bdb2b047c6a464a562ed77b73d2d841c4
            b34973551257713b753632efba348169abc90a68f42611a40126d7cb21b58695568186f7e569d2ff0f9e745d0487dd2e
            b997cafc5abf9dd102e62ff66cba87
            """,
            context: "",
            signature: """
            e301345a41a39a4d72fff8df69c98075a0cc082b802fc9b2b6bc503f926b65bddf7f4c8f1cb49f6396afc8a70abe6d8a
            ef0db478d4c6b2970076c6a0484fe76d76b3a97625d79f1ce240e7c576750d295528286f719b413de9ada3e8eb78ed57
            3603ce30d8bb761785dc30dbc320869e1a00
            """),
        Ed448Vector(
            name: "TEST abc", prehash: true,
            secretKey: """
            833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42ef7822e0d5104127dc05d6dbefde69e3
            ab2cec7c867c6e2c49
            """,
            publicKey: """
            259b71c19f83ef77a7abd26524cbdb3161b590a48f7d17de3ee0ba9c52beb743c09428a131d6b1b57303d90d8132c276
            d5ed3d5d01c0f53880
            """,
            message: "616263",
            context: "",
            signature: """
            822f6901f7480f3d5f562c592994d9693602875614483256505600bbc281ae381f54d6bce2ea911574932f52a4e6cadd
            78769375ec3ffd1b801a0d9b3f4030cd433964b6457ea39476511214f97469b57dd32dbc560a9a94d00bff07620464a3
            ad203df7dc7ce360c3cd3696d9d9fab90f00
            """),
        Ed448Vector(
            name: "TEST abc (with context)", prehash: true,
            secretKey: """
            833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42ef7822e0d5104127dc05d6dbefde69e3
            ab2cec7c867c6e2c49
            """,
            publicKey: """
            259b71c19f83ef77a7abd26524cbdb3161b590a48f7d17de3ee0ba9c52beb743c09428a131d6b1b57303d90d8132c276
            d5ed3d5d01c0f53880
            """,
            message: "616263",
            context: "666f6f",
            signature: """
            c32299d46ec8ff02b54540982814dce9a05812f81962b649d528095916a2aa481065b1580423ef927ecf0af5888f90da
            0f6a9a85ad5dc3f280d91224ba9911a3653d00e484e2ce232521481c8658df304bb7745a73514cdb9bf3e15784ab7128
            4f8d0704a608c54a6b62d97beb511d132100
            """),
    ]

    static let x25519: [MontgomeryVector] = [
        MontgomeryVector(scalar: "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
                         u: "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
                         output: "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"),
        MontgomeryVector(scalar: "4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
                         u: "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
                         output: "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"),
        MontgomeryVector(scalar: "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
                         u: "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
                         output: "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"),
        MontgomeryVector(scalar: "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
                         u: "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
                         output: "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"),
    ]

    static let x448: [MontgomeryVector] = [
        MontgomeryVector(scalar: """
            3d262fddf9ec8e88495266fea19a34d28882acef045104d0d1aae121700a779c984c24f8cdd78fbff44943eba368f54b
            29259a4f1c600ad3
            """,
                         u: """
            06fce640fa3487bfda5f6cf2d5263f8aad88334cbd07437f020f08f9814dc031ddbdc38c19c6da2583fa5429db94ada1
            8aa7a7fb4ef8a086
            """,
                         output: """
            ce3e4ff95a60dc6697da1db1d85e6afbdf79b50a2412d7546d5f239fe14fbaadeb445fc66a01b0779d98223961111e21
            766282f73dd96b6f
            """),
        MontgomeryVector(scalar: """
            203d494428b8399352665ddca42f9de8fef600908e0d461cb021f8c538345dd77c3e4806e25f46d3315c44e0a5b43712
            82dd2c8d5be3095f
            """,
                         u: """
            0fbcc2f993cd56d3305b0b7d9e55d4c1a8fb5dbb52f8e9a1e9b6201b165d015894e56c4d3570bee52fe205e28a78b91c
            dfbde71ce8d157db
            """,
                         output: """
            884a02576239ff7a2f2f63b2db6a9ff37047ac13568e1e30fe63c4a7ad1b3ee3a5700df34321d62077e63633c575c1c9
            54514e99da7c179d
            """),
        MontgomeryVector(scalar: """
            9a8f4925d1519f5775cf46b04b5800d4ee9ee8bae8bc5565d498c28dd9c9baf574a9419744897391006382a6f127ab1d
            9ac2d8c0a598726b
            """,
                         u: """
            3eb7a829b0cd20f5bcfc0b599b6feccf6da4627107bdb0d4f345b43027d8b972fc3e34fb4232a13ca706dcb57aec3dae
            07bdc1c67bf33609
            """,
                         output: """
            07fff4181ac6cc95ec1c16a94a0f74d12da232ce40a77552281d282bb60c0b56fd2464c335543936521c24403085d59a
            449a5037514a879d
            """),
        MontgomeryVector(scalar: """
            1c306a7ac2a0e2e0990b294470cba339e6453772b075811d8fad0d1d6927c120bb5ee8972b0d3e21374c9c921b09d1b0
            366f10b65173992d
            """,
                         u: """
            9b08f7cc31b7e3e67d22d5aea121074a273bd2b83de09c63faa73d2c22c5d9bbc836647241d953d40c5b12da88120d53
            177f80e532c41fa0
            """,
                         output: """
            07fff4181ac6cc95ec1c16a94a0f74d12da232ce40a77552281d282bb60c0b56fd2464c335543936521c24403085d59a
            449a5037514a879d
            """),
    ]

    /// RFC 7748 §6: private key, public key.
    static let x25519PublicKeys: [(String, String)] = [
        ("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
         "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"),
        ("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
         "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"),
    ]

    /// RFC 7748 §6: private key, public key.
    static let x448PublicKeys: [(String, String)] = [
        ("""
            9a8f4925d1519f5775cf46b04b5800d4ee9ee8bae8bc5565d498c28dd9c9baf574a9419744897391006382a6f127ab1d
            9ac2d8c0a598726b
            """,
         """
            9b08f7cc31b7e3e67d22d5aea121074a273bd2b83de09c63faa73d2c22c5d9bbc836647241d953d40c5b12da88120d53
            177f80e532c41fa0
            """),
        ("""
            1c306a7ac2a0e2e0990b294470cba339e6453772b075811d8fad0d1d6927c120bb5ee8972b0d3e21374c9c921b09d1b0
            366f10b65173992d
            """,
         """
            3eb7a829b0cd20f5bcfc0b599b6feccf6da4627107bdb0d4f345b43027d8b972fc3e34fb4232a13ca706dcb57aec3dae
            07bdc1c67bf33609
            """),
    ]

    static let brainpool: [BrainpoolVector] = [
        BrainpoolVector(curve: "brainpoolP256r1",
                        dA: "81DB1EE100150FF2EA338D708271BE38300CB54241D79950F77B063039804F1D",
                        xA: "44106E913F92BC02A1705D9953A8414DB95E1AAA49E81D9E85F929A8E3100BE5",
                        yA: "8AB4846F11CACCB73CE49CBDD120F5A900A69FD32C272223F789EF10EB089BDC",
                        dB: "55E40BC41E37E3E2AD25C3C6654511FFA8474A91A0032087593852D3E7D76BD3",
                        xB: "8D2D688C6CF93E1160AD04CC4429117DC2C41825E1E9FCA0ADDD34E6F1B39F7B",
                        yB: "990C57520812BE512641E47034832106BC7D3E8DD0E4C7F1136D7006547CEC6A",
                        z: "89AFC39D41D3B327814B80940B042590F96556EC91E6AE7939BCE31F3A18BF2B"),
        BrainpoolVector(curve: "brainpoolP384r1",
                        dA: "1E20F5E048A5886F1F157C74E91BDE2B98C8B52D58E5003D57053FC4B0BD65D6F15EB5D1EE1610DF870795143627D042",
                        xA: "68B665DD91C195800650CDD363C625F4E742E8134667B767B1B476793588F885AB698C852D4A6E77A252D6380FCAF068",
                        yA: "55BC91A39C9EC01DEE36017B7D673A931236D2F1F5C83942D049E3FA20607493E0D038FF2FD30C2AB67D15C85F7FAA59",
                        dB: "032640BC6003C59260F7250C3DB58CE647F98E1260ACCE4ACDA3DD869F74E01F8BA5E0324309DB6A9831497ABAC96670",
                        xB: "4D44326F269A597A5B58BBA565DA5556ED7FD9A8A9EB76C25F46DB69D19DC8CE6AD18E404B15738B2086DF37E71D1EB4",
                        yB: "62D692136DE56CBE93BF5FA3188EF58BC8A3A0EC6C1E151A21038A42E9185329B5B275903D192F8D4E1F32FE9CC78C48",
                        z: "0BD9D3A7EA0B3D519D09D8E48D0785FB744A6B355E6304BC51C229FBBCE239BBADF6403715C35D4FB2A5444F575D4F42"),
        BrainpoolVector(curve: "brainpoolP512r1",
                        dA: """
            16302FF0DBBB5A8D733DAB7141C1B45ACBC8715939677F6A56850A38BD87BD59B09E80279609FF333EB9D4C061231FB2
            6F92EEB04982A5F1D1764CAD57665422
            """,
                        xA: """
            0A420517E406AAC0ACDCE90FCD71487718D3B953EFD7FBEC5F7F27E28C6149999397E91E029E06457DB2D3E640668B39
            2C2A7E737A7F0BF04436D11640FD09FD
            """,
                        yA: """
            72E6882E8DB28AAD36237CD25D580DB23783961C8DC52DFA2EC138AD472A0FCEF3887CF62B623B2A87DE5C588301EA3E
            5FC269B373B60724F5E82A6AD147FDE7
            """,
                        dB: """
            230E18E1BCC88A362FA54E4EA3902009292F7F8033624FD471B5D8ACE49D12CFABBC19963DAB8E2F1EBA00BFFB29E4D7
            2D13F2224562F405CB80503666B25429
            """,
                        xB: """
            9D45F66DE5D67E2E6DB6E93A59CE0BB48106097FF78A081DE781CDB31FCE8CCBAAEA8DD4320C4119F1E9CD437A2EAB37
            31FA9668AB268D871DEDA55A5473199F
            """,
                        yB: """
            2FDC313095BCDD5FB3A91636F07A959C8E86B5636A1E930E8396049CB481961D365CC11453A06C719835475B12CB52FC
            3C383BCE35E27EF194512B71876285FA
            """,
                        z: """
            A7927098655F1F9976FA50A9D566865DC530331846381C87256BAF3226244B76D36403C024D7BBF0AA0803EAFF405D3D
            24F11A9B5C0BEF679FE1454B21C4CD1F
            """),
    ]

    /// secp256k1: k and the coordinates of k·G (SEC 2 §2.4.1 generator and its small multiples).
    static let secp256k1Multiples: [(Int, String, String)] = [
        (1, "79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798",
            "483ADA7726A3C4655DA4FBFC0E1108A8FD17B448A68554199C47D08FFB10D4B8"),
        (2, "C6047F9441ED7D6D3045406E95C07CD85C778E4B8CEF3CA7ABAC09B95C709EE5",
            "1AE168FEA63DC339A3C58419466CEAEEF7F632653266D0E1236431A950CFE52A"),
        (3, "F9308A019258C31049344F85F89D5229B531C845836F99B08601F113BCE036F9",
            "388F7B0F632DE8140FE337E62A37F3566500A99934C2231B6CB9FD7584B8E672"),
        (6, "FFF97BD5755EEEA420453A14355235D382F6472F8568A18B2F057A1460297556",
            "AE12777AACFBB620F3BE96017F45C560DE80F0F6518FE4A03C870C36B075F297"),
    ]

    static let nistECDSA: [ECDSAVector] = [
        ECDSAVector(curve: "P-192",
                    msg: """
            66e98a165854cd07989b1ee0ec3f8dbe0ee3c2fb0051ef53a0be03457c4f21bce7dc50ef4df37486c3207dfee26bde4e
            d62340cbb2da784906b1b783b4d601bdff4ae1a7e5e85a85afa3208dc60f0990c823bedddb3db663426665152ed7b093
            d6bda506c93a694b83ac71553f31f5cc0d6ba2fa248090e8796573c4915d1586
            """,
                    qx: "14f69738599689f5706ab71343becc886ef1569a2d1137fe", qy: "0cf5a433909e33217fb4df6b9593f71d43fb1c2a5653b763",
                    r: "af1f749e3df6220ff04efd178618a977e0838b1b9dc126e3", s: "8990a04c6cc0ff26264ecf8f7831381a9dbc6e53cc8cc860"),
        ECDSAVector(curve: "P-192",
                    msg: """
            d39ad56135bec4c3c4362d59d3d9175acb386670c5db0a1757ce7646ad5d5352dc1b760f7429103854b42511c3c0404a
            bc24642788d645de9369b84178d4699c5e75cce18756560226aeec9f71ab9ce1f86e8ba635582ede6484bd349594e5f2
            ffb1be1e97cdfce9e12b694b062293e7281ec134f2e72cde73266c6a2c25311a
            """,
                    qx: "386afa71afc065019f3d2021ead531ed1d365887122d2d4b", qy: "bbfb6e9cdb32c2252015acfb4cfb049b08b4cb279c64928a",
                    r: "337be42eebdcedd97678eeaae9d1b231b740a191a293c22a", s: "9d6766b391e95f649e05442453a85466da29eaa97ddcfc62"),
        ECDSAVector(curve: "P-192",
                    msg: """
            477101daa282a5a55b48c5313290c8da65b07cc4d41a5a1463300c60a05a2c63a6564ff641d0423c5233931c75be53f4
            e2da1b8b91ab4d48a2e59ca2fbe1cfd833f0c1e2afefada70a1ba870ba276f9df18c6397c221d20585eb78437c36460f
            b7e4628634066e504ba90d1749f2a33d5c6e5dceafa372b3d5eba8296b821972
            """,
                    qx: "3b1c19d73b6a4d7a12003530a54ae0f5ba18d75c98a0db95", qy: "afb8bd8c94c6e3d5dc050e3641c0fad771557ce97f5f3dba",
                    r: "e36d5dbb9560d959814cbd30aa6a405da9652fbd250da9ab", s: "f2db3d62733f6d08b08ef0682f579ac527950117f39e474b"),
        ECDSAVector(curve: "P-192",
                    msg: """
            85bcd406f4cdc8f30e19553ba92f9c0894b2833d7bb0b5650a30ebe8550a698578fccbfc7af9010b78c4999cffbe3c3d
            b9fd7cd04c9dcd847f5bd0049f5fd8ee215aa78688d178ac89b9430b6d433c94b8f99c2b080aa59f3fe2e0e0e4feaa6c
            c7ffee0be4fd34bc8a1ddbefbd66a2f4d8d06eb4779e479f93eea3e5ef8fe7e9
            """,
                    qx: "21933e6e8cdcfff62f36c45e83dece1280a888663a34608f", qy: "565890e37fdf563595d24524ef1da9aae246892e75a74234",
                    r: "1791e503645e53a8304f2a44715942c6aab315b0086f4147", s: "366309b7f79b2fd98d6c2f3a8424178b01235041f9869552"),
        ECDSAVector(curve: "P-192",
                    msg: """
            c8888ddf35fb43d262a5f4eebec73195f0fa79571b68a3c3613b7b7ca656b0909643ee06e96d47b6e590d75e256da8f1
            9ac2d332cf79e882712090f60e9971ad1d1352613f39803bc4a870ec71a7a5f98012d456e9984737e0277f239fa31d4a
            65de0318bfc5b60a06d706c129dcf255acd3c6ebf12c868ab7378f2ae0dd7c0e
            """,
                    qx: "4828ad4aff5d87dcca98a341344a462edf277850755c7277", qy: "8a1bfc6b7b0424e15454ac198d4d697927f4eaaf9d14d88e",
                    r: "c438ca66c5d3b19e2bcd26a5c54742435f25ee0e9364b41c", s: "ff194479695afdcc88645f2a309cb99717beac26794c0658"),
        ECDSAVector(curve: "P-192",
                    msg: """
            637ac61c9a108a77d1d34f42676f9d314bedeb32c9341208a3cf023564f0b41ef1b5606a61abefab0e91b340ec5e567a
            1a8510fdb7771d69f7696f3a7658a0edcc4b2a6561d9da8c83ea823db5c2ef624a3b1a593351a29d16e47aa2a0badf00
            1bc48ed443a23363556824016aa34f320397720ee5cb8aea27c88d34891d5b9f
            """,
                    qx: "2f5d05cbd620145b41d0a1c656d676ead2fc651b3cf71cc2", qy: "88d2386cfb812d02a1fa19578a7cd04b356920a2b2e69839",
                    r: "cde95d12d650102c535fdc1994fc468308b05e2af7af9c14", s: "c2606a54e7592214a265270918322ae33d487268b9108cae"),
        ECDSAVector(curve: "P-192",
                    msg: """
            d154754899fcbfe2a48e2c70bc406cf2b13070a59d9eced46c5868f19c7549e44246cfa34e8a0f030fe175cefa84ab15
            a732bcc71c6e7a834ee71dabe5382cba40d1a1d7b93548aa2a67686eb09ea547ae4025d6150ef20be39c9f3bea052f73
            d3dc320b6266317efc064c7966f82231cf42f1fa11e8fe16346038ca334518b7
            """,
                    qx: "47e8ec5e1edb1d23c04ebfeefd8cb8bf39cd48c348de3ea7", qy: "b1167b3a4e2fbe167bbd7b7b06bf1314d58d9e3976ffa47f",
                    r: "539e285389399c785dfc4f3bfccbc825602f443ae0dca3d1", s: "ed56e54fbaa0b7c0bc462920314031c7a3e7b2eb701cb9db"),
        ECDSAVector(curve: "P-192",
                    msg: """
            264be37369846f67019fb31f94fc9e9ab03c5c2405a62ad8d1c968649b63ef0c2482a6f29be9509410b5a8962b41b0c2
            1e46464dd847f85b7b2c19c6112d141b7bf101e6a9f776301136a045590092bb572cdcaf3c7460520c1c61a552d5dd80
            11e01dd9fd768a43eb68c2b58703eb8d453648d49af709c46be26887c623f142
            """,
                    qx: "a4db1303bf13696e26678286e27c166dd87be98cc8be2844", qy: "09b4de84bbfa77e049ace272a12d0dd141d363e74ec12511",
                    r: "6818d44aea421701e3f41600c867fb3d3749eadbf33820fa", s: "658b228b2edd8569f6940fee1c303626e48181094581987b"),
        ECDSAVector(curve: "P-192",
                    msg: """
            66e69dc2a47b31515a71456e329cf02b08331b1543d57e5c66c9cb34e28a287a2f83e39b1a1761b261e458f07d493e41
            bf25022c9ee2f9fb50b31b1d97196fc8deacc4e38418a22278668073067d3799f0e8b716c1d9f94f5e6e35ebde34547c
            9beaa8618987dbebc77e25be7440c27ac402a49b53c1659eb9847f665ee2bfdd
            """,
                    qx: "270d7bb9bfab54529240426a08508f1ed90dc7914cdf11f3", qy: "c91ed7f2eca39f563757c5b518d9c28d4d41e7bdc0c7f53e",
                    r: "db20f09b69ac79e224258800ebe6cc51a2e12536b69396c8", s: "d31df9544277f4a79676fdc7a51faef73ee2a0d1057ff3a2"),
        ECDSAVector(curve: "P-192",
                    msg: """
            ed3f4b0c4b79ddd5b048b7b9f3f687fb578aca7560493f3ae57e9b7b65777ea79fd0a6d65cf4636890e04ae9a12a2e38
            07424ce915f9c6e7163f535e9c3134d815536aa69f1926811ead81718bec6dee8fb1eb4550577f3e8b79e1fce3fcf624
            7850fe42bcf20f688236c21858432c63175f1053b86d528769b3af1de0e1acd5
            """,
                    qx: "6a5723e72f6270160f256ddd403c108503388d4320f7926c", qy: "f52b0e0e4c8871443cfc0c231e856f6adc2a7c3318a43578",
                    r: "6505663a952b741c4583e755496740833d5901fc09433963", s: "de0411972e27bfb80362b44650e687866cd202a4199d605c"),
        ECDSAVector(curve: "P-192",
                    msg: """
            6a8b595076518880f008382eed3e51f2b3f06c4fce4c8c9261bb08fdbb1fcc252a59c299140f8ac443ac711581a8a15d
            650995786c2ad02f4bbbcf5d84093c51387f64743c6deb2b6f09beff4ab44afcb87eec5628eba853e1f81d649659b895
            3b05292817f4137d192708366feab498555658332b197bc5cb7adc5c1997aabb
            """,
                    qx: "1c0e4fc6d8f4e7605f2bf57541395f5167d41d8bdd5c4f80", qy: "775da73226020bad6ec4df5022a8c61aee064372ba535ae7",
                    r: "bc540a8f5ea81c6144698f5452556f17da76a52636461d70", s: "2de23f6cc9a45899a9f605dab9f28fddf9e376ea06c92db5"),
        ECDSAVector(curve: "P-192",
                    msg: """
            efd5d82000249ef168a04bc39f32356bbae83e0be19af1da03cdce23c8d7e191c8449aa9fa79d8986f97472f40a2ec2c
            c5e3febb078af83c7898ec47e2fc1aed9efcc14106d735182ca9320ccd8e70c7800a777e33a9b5bbd8e2ce605c4133e9
            d9c6f6f10c88ddf7099db5632d3ee8c45527525c4d3d51de8c731b761eee550a
            """,
                    qx: "194e8fdd4b6b84f1955d1919387f96facf6feadd8105d8dd", qy: "2eb47a2ed3aac4250be37f9e31d7ff87be4043ac1eac401f",
                    r: "0bbd331b5cbcaef2b26e27bdc559d31c62d5c9b6b8979603", s: "c1670a3b435805fa7ab20e6dd8ffa1012e9fb41b1d7d0176"),
        ECDSAVector(curve: "P-192",
                    msg: """
            f9e23934afaa64634c91b5a148c1fd85a9b5188ccaf0cf6b5beffda4a95cf1581f84145c0d0bcb8fa9de9f6a546a9cd8
            1e0cf6488bc8f301983d04b6f9d8355ba549c83794331d39c728d68f8ad43875f678d34bb99b65eb1afcfc3937ca5bfc
            91179feccb8b220baf55a0397267980339e3f5bddbd0eed0e9122b54ec9929e2
            """,
                    qx: "18b94fc7825bad91b1ca5a69cdf576377ad76965670d3967", qy: "0a73253d6df54d5105f0ca2f948d0686706dbd064744f7c3",
                    r: "1a813b607c0b4d71e7acdac040eb78b3795e53bc498bae85", s: "67fc1124c30966473dc6a1f14ae32ec2dd860b3667c61dec"),
        ECDSAVector(curve: "P-192",
                    msg: """
            aa0090570f6fa81ed02fa1ce2c124ffd3574f2f8d4285e570eb359d585b8455f42b4ff6bb1ec068beda3e0423e8fb916
            e18e4ee60796097e1fea6d695894b506620fb8df7544103595b87be01403815658845809df5304f67f77c27af359a768
            9379855a63600e444fd63c4fb554f0e424bcd906644897e6b6c020b15cf163ad
            """,
                    qx: "3888a94ef288ebe32b4b9b53bf2d3a85b45976583251f0ec", qy: "30156d8e0d212a66c071fb2e7b422ef1784a95dacffd9edb",
                    r: "37033150afed029fd8390716eac6500223e72154ccff9fee", s: "b4e978e8d499cc1be576dea74c0dd74cafe9e794a7563172"),
        ECDSAVector(curve: "P-192",
                    msg: """
            a3bbbad76671d8fdacbbee1f5ab241bd0178ff996e7677187ce888ea2d9c5aedf9f64d4f66382ff4d900b217ac131d33
            80584124d528af89d8c5286e7b275528cbffb87f7ff6e313cc35e8f8812b10a44f8ad00b6893f8084d942effe0af9bc1
            c1dce4afd7315c232d62780b008483d7161692965141bb5b835f82e684bb9480
            """,
                    qx: "b11956a29af6984043973e2de46d53d870e04687cae59728", qy: "c915f88aa0fa9822762cc4e60df759d189a10c486b901d5e",
                    r: "c459f7bcea050210e3369ac174ba89c823ca1b0d4c0964f6", s: "04715cba9ba31c4ed9bf0be07d194e2a709294472cc60bdf"),
        ECDSAVector(curve: "P-224",
                    msg: """
            66e98a165854cd07989b1ee0ec3f8dbe0ee3c2fb0051ef53a0be03457c4f21bce7dc50ef4df37486c3207dfee26bde4e
            d62340cbb2da784906b1b783b4d601bdff4ae1a7e5e85a85afa3208dc60f0990c823bedddb3db663426665152ed7b093
            d6bda506c93a694b83ac71553f31f5cc0d6ba2fa248090e8796573c4915d1586
            """,
                    qx: "56fb6538f1723d2bef3c764134320b44ba615f663db804e54050b95a", qy: "9514a442eb66dbf2b450746f66d54101877a50d4bc2910c61d005add",
                    r: "9660bfffc173431d29f83fa2af0ba581791be3f43625316f395d27ff", s: "9e8c3b82bca2a4467c9694c666dff7f0e79d279bd64eb83bce2e3018"),
        ECDSAVector(curve: "P-224",
                    msg: """
            d39ad56135bec4c3c4362d59d3d9175acb386670c5db0a1757ce7646ad5d5352dc1b760f7429103854b42511c3c0404a
            bc24642788d645de9369b84178d4699c5e75cce18756560226aeec9f71ab9ce1f86e8ba635582ede6484bd349594e5f2
            ffb1be1e97cdfce9e12b694b062293e7281ec134f2e72cde73266c6a2c25311a
            """,
                    qx: "391de80590dfbc60bb41cc9f3d93706d1d0083f1ef31d3a031fdc604", qy: "4dd1928e557636f0a5df082aa0b185d08f57d1d5bf7857fceeb8c4c1",
                    r: "fc9a2058b2a7b64c3c48f40a3643b18dbf418f579929bf52a5dea773", s: "05653b946b270aaf01351b21de753508610b1a76cf42366f1a6c1d62"),
        ECDSAVector(curve: "P-224",
                    msg: """
            477101daa282a5a55b48c5313290c8da65b07cc4d41a5a1463300c60a05a2c63a6564ff641d0423c5233931c75be53f4
            e2da1b8b91ab4d48a2e59ca2fbe1cfd833f0c1e2afefada70a1ba870ba276f9df18c6397c221d20585eb78437c36460f
            b7e4628634066e504ba90d1749f2a33d5c6e5dceafa372b3d5eba8296b821972
            """,
                    qx: "993473a7d4b333e34c17ebfaa86ed929c8645ccfd79759c084cdb174", qy: "a26ad50e57347965b42d5a159ff53a28957a5f3b57a844dcd0ee6d54",
                    r: "259fda3143c584131ab8e49feaf93dad3b86575f2789962406bf8092", s: "cea1cc15e28c094c3bc557b3f5a5172b62910cd7cfbb6193ae6d8dd2"),
        ECDSAVector(curve: "P-224",
                    msg: """
            85bcd406f4cdc8f30e19553ba92f9c0894b2833d7bb0b5650a30ebe8550a698578fccbfc7af9010b78c4999cffbe3c3d
            b9fd7cd04c9dcd847f5bd0049f5fd8ee215aa78688d178ac89b9430b6d433c94b8f99c2b080aa59f3fe2e0e0e4feaa6c
            c7ffee0be4fd34bc8a1ddbefbd66a2f4d8d06eb4779e479f93eea3e5ef8fe7e9
            """,
                    qx: "b8c33944ff61c5600904ca2ae0aefae6d21bf3c74aa21fafd824ca69", qy: "ed93a6edb3f3c3c4997ebfbc97664965449e5ed7eaae875fc328f0ee",
                    r: "6b4bc7a907090db66e3a02258f043c40330403b22dea131bad0dbb86", s: "ecea70cd6921e9342d49b88191c020d2bfaffaa67df59388db4a3ea5"),
        ECDSAVector(curve: "P-224",
                    msg: """
            c58cc5e0eba51a42e3a988c2432481db2e01537284effc5c56093f219db5f7ff2bccac32e1fc6473236bbbbf899d3659
            d798d5123046e7c8861a222d55f6f3c9914d1343dd855bdcfd9fd93c8e192371f413eb3595b2d46f45c284fd009ffbb1
            df5523994506a884598c09c1ba60f02a6ebabf621bfa6b5a79478d1a0776b6be
            """,
                    qx: "3b55be3a8cc5c47085ab5d29e3b6c28e51e74b79d1a874b5d7bbbb20", qy: "aeba7d2ff67e2f6861e4de552116bdc1cfa4f187149d19abd1acd758",
                    r: "3da522ea72e2532aa43949299101d3125cecc1bf45747ee1fd49ded8", s: "f822638396a4c1d1d6a5eccf89bd26f4248bde681631a290de7db412"),
        ECDSAVector(curve: "P-224",
                    msg: """
            b52ada0e56c5d6f552fceacdd0af880ff4c2126554c3f069accde1b0d2ac8e07ec4165fce028a4a10c99b48c388cb922
            c8216716363e172cc07a1a435e3a4d92f719ed32d48eaddc55c906f5e3ddcfc725240d1277df0cc3981eaf03a2e00473
            407a1bb61b3d19319553880ebaeaf1877395ad61fdeef8b69a8147f887e5dc33
            """,
                    qx: "f3465da1238fa959b4b525b127b53abf0c9e295dc830874635c4ccd0", qy: "b42af0bb8feb22d4889eb3e4fe256d61beb50f02d70e875071fc87a7",
                    r: "d02011391fd353b772b3a3a72fc1e40f9be7d4a86a5428f1634d6a30", s: "fc550f23ca67bb0874210fda9344d4853ba114f543697a94594c96c2"),
        ECDSAVector(curve: "P-224",
                    msg: """
            24e3b449e3b648a4c37c048815d1638dda430cd48507b15202eb376bf68c17c349c90451e277ceb5b15686cbf344e380
            b1b1e4e48a53b781b31bdaec3c678099957936f35028c6ac28d55b5243a1e724b4ddc22344c3946c726374c4b8df5175
            10db9159b730f93431e0cd468d4f3821eab0edb93abd0fba46ab4f1ef35d54fe
            """,
                    qx: "e5f58264c651f8981991cf8de0dbf90235c31c93a0a63ce1e484915b", qy: "f16234cb0166a73160b05c314cc7a0c9476e6fcf3bc1146ed12881de",
                    r: "8f2856eba0024cc8afbf1705d0cab81071b3b2b62cac22a5861db0ad", s: "669365489e790763112af6288ea73c048102ef5f60f380b8fceab913"),
        ECDSAVector(curve: "P-224",
                    msg: """
            b2f141d96ad8a2b903a89ebc51f7473e94128612a09160bd3b2f77e2c7d9d4fe2105e356c845bf2d421cb039bb10f358
            f000b9804bb871f44fc34abe3780f459da79a7aed2ef6742ddba86ad83506a4efa23913d4630d181a4d4e58329e225c3
            a7f495cad0fe21609e2927fef2de36867b201632d92008ca020b4e1be527eea4
            """,
                    qx: "04015992286133eef54e6e91ecc58c021c25806191bcf668f7f65127", qy: "a32a50f28e1a4f2f076498f50bf27c291103f993cb88ceb45ac550cb",
                    r: "4a3b1d8f1d224b3491c7d3af160ace4da3b5da16e77d9f8bcd19592d", s: "4353c4d87053d78c821d29ba926bb00442169875b9d95618f9350152"),
        ECDSAVector(curve: "P-224",
                    msg: """
            bc64299165358e19e5ac855cdfabfbe6c7ae09b4ac506fe054113e808e56d4cbc4b10d7dd063b87d101f48bdbd11cc62
            781f2226266f67fafe29b1efe07e0156e9e9732644b4b89f43bfc62dae7dce8f5b3f6f38feb529f643b114d11a2fd236
            5293c2556a3176c7a41268745af5e8b4959559b4dc2a9d1c4a32ceeee4712fb1
            """,
                    qx: "cc602a858276f944bccca2acbbd8c9518b3cd9f062e4802e342780d7", qy: "5650efeddbce1c00f506a3f88a8f57669405e344901cfb51ce54c15f",
                    r: "7374f7df8e9e6b2bcb4e82258a0fa8b136b93aba18a53a79e8c8e897", s: "a4a5da18cbb987e48a80a73bd69be378ce476fbbda6468c4a49b7219"),
        ECDSAVector(curve: "P-224",
                    msg: """
            11d4344dcaa9f67c1679ac2fbf77056694c5f25eb29f0a6202d72ce4038166cccaef151047e04e85c9f47df5c4634c71
            d3efc7e8f917bdf92c8e690614eb518a10a26fac7a338f142ca1f8fd42264e8b2225b75fba603d6a096b74fee1615c2b
            ebd58848eb0b80d045686570c128d35d8b4f0beb7ee2525ca15694f5f2494d58
            """,
                    qx: "544bf08e35ffa3c960553c9723ee7097b7dfaae059adccf2da75299b", qy: "999dae3a21782cc21ba3a50181dc7e67b8d7960f9d58d094a3b141ef",
                    r: "5bf01553db59eb4530e72157d39f03dab9167ffd0df3abb74d822fdf", s: "0c104e52018dfbdd5386ddb9599b41abf2107708a3dc86b35f68dc1c"),
        ECDSAVector(curve: "P-224",
                    msg: """
            003b648e92b1c17b00081c88b58be28516a32e2cc10231fa1222d73deceea76db6bfecbfa38912f83757527f07f492b7
            c0eb868b6ab21c4bee2317b6d62bf95855c62716872b4807f943ee856c607884d62c3723aae0cf8159b6e0d219a0e6b2
            e53a5eb8c5fd2b4f4fb637c16e375d95624d871b08f213455cc37cb83cb43623
            """,
                    qx: "b48b9585bdfa5ad902d3d91317cf1aae9a175d39364a18e5dd9e133d", qy: "b03426dc8660543e13bee6660b43c453fb1c7a13a847e98a5d9bb038",
                    r: "707cf96de23f84dc987351599b63bc16cb6aa876fcebdefbdcc40eee", s: "dd71fbb5bce18e0041c867d577271b67832c139901c7194c50aa94ed"),
        ECDSAVector(curve: "P-224",
                    msg: """
            6453fe087d564e4b5a0e7ff5e705fb9602f4b033309b67478ef151080b7de3ebd504e46a1164c505cfc030873ddde38a
            1accbf3d6eca1c65796460a2e9dfd0f450d6a67dd4256389290666cbbc7abee931eb3d3c100fcdd1bb0f07b3a4e9026c
            bc1369c92f61d1de4e28494acca432bc2e9751b67d3322913e3a6fc2a464225b
            """,
                    qx: "dc20b984eb646343679e8299763416cb9af27fae39f297da3cdb934f", qy: "0e63b6fd5e0a2f79acc5004c2120ecaa57f55b3993c7c27efaea581a",
                    r: "1bf7ada14936a7411e29725d867e1f5c88ead2e4eea36e4a8e2e7b89", s: "9ee15ffedb03549eb2f5aab0ebfe335bb35ea325d0af71dedd82e90c"),
        ECDSAVector(curve: "P-224",
                    msg: """
            33d876e7e56b0a8443f1dc284b41f30d5a13b94943c2abad9f5155ee65ad7e02bb31a0cd0b6f9bfd582ea933d3af9563
            a935287d20c3e54de228f6a0983965a8bb5e8fa1a750d6b5f220971dfb7c5c8ac62e52c307e5fd8f7c382ad580e82502
            de652dabe3942574b7d08c30ed2faf4958061d6220af5c3c1689dad6454126d9
            """,
                    qx: "7516eeb4db631f0fd6fde701aa1893ad115591e37cdfcc52b714e778", qy: "62e0164883b23cc4f4d5e06e766070e86fe377f12dbec46eafe5f4e2",
                    r: "d27ff094808787c76495af70419426149ec11059cdd39f2581b8d135", s: "f450a12774d1a9c843e76ec1a24fe15064b21ad2bcda9dfb0cf6fd2c"),
        ECDSAVector(curve: "P-224",
                    msg: """
            7210e879ebd15f29dd3f8e6ed639293ec7823b82c36f106e04e3520e2f7d7222d810492c495400c77fdb2d3a76463e4d
            a7b81b5cce8b07a9f042c7f69dbf075473b7f936e3623fc938770b88d457850bbd886d1f5966011c761521738dbab187
            48eb3fbe4164e5d70dfb717e79d6c41d13db78f6ed68c66f9d44a6ac88d63763
            """,
                    qx: "3e4409baa7817f25c694a4e65e7045e124ea0cef548269fdc9d73398", qy: "9d91568f038a43ad6a0a91b42476369ccc67cdd88b16f71c09d9e00a",
                    r: "676d6f6a3fa61bf0f3cf5f7447563df101361f9b09181334179ef6ce", s: "0686517815bdb6ece3bda257a821a6b7249931e5ccd575332f77d358"),
        ECDSAVector(curve: "P-224",
                    msg: """
            228edfdefb8c9011d4e6130f81307f29577b731292279c4ff4f97de9af6d6f65854ee6f52e83f7f0fa2c1780b7ee269b
            d58aac34c8b562b2ae24f4a132e605a7b0f673ba9a11dd911ac56358f8cbada8bf962fb61b2cabcb8635f7f4235100fa
            eaaf0f9406dc4bdc7bd880000c6f1e3a5cc6850253357f82c3540e4a4c596945
            """,
                    qx: "252cfda1f1f2ba7a78eb7ab2adab3d12ee830cd0e827d60635a83614", qy: "ca7465c5fd9ad07fdf5460abcd94da23e2ee520cfbdef8eb66cc0bfc",
                    r: "a8176f8756a2fcc73ad799498cc3fa7cd34746650c7ffc15b2d0a4e0", s: "bcdb2190028362be803d776dcb6dc2aafcd0bf9997e7425f3e05ddf6"),
    ]
}
